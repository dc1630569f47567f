"""``ptkit build``: build one variant's wheel here, the way the release pipeline does.

The recipe (``recipes/<variant>.toml``) is read once and its :class:`~ptkit.recipes.model.Recipe`
goes to every stage. Five stages, each printed as ``[i/5] <stage> …`` with its duration
(:mod:`.run`):

1. **build** (:mod:`.build`): scikit-build-core through pip, the variant's backend
   required, the build report, a compiler cache when one is installed
   (:mod:`.compiler_cache`), a cuda variant's toolkit found as CMake finds it
   (:mod:`.cuda_toolkit`);
2. **repair** (:mod:`.repair`): ``auditwheel repair`` on Linux, torch's libraries left out;
3. **audit** (:mod:`.audit`): :mod:`ptkit.release.wheel_audit`;
4. **smoke** (:mod:`.smoke`): the recipe's ``[release] test-command`` in a fresh
   environment that sees this one's torch and toolkit;
5. **dist** (:mod:`.dist`): the wheel moved into ``dist/<variant>/`` atomically.

Any project built with ptkit's CMake package goes through the same stages (``ptkit
build --source <project>``).

Everything happens in a scratch folder (``<build root>/pipeline-<variant>``); ``dist/``
is touched only by the last stage, so it never holds a partial or failed build. A
failure raises :class:`BuildError` naming the stage, the cause and the fix; the scratch
folder is kept for ``ptkit inspect``.

Reproducible: ``SOURCE_DATE_EPOCH`` is set from the last commit (``git log -1
--format=%ct``) when unset, so two clean builds of a commit give byte-identical wheels
(the zip timestamps of scikit-build-core and auditwheel follow it; the compilers get
``-ffile-prefix-map`` for the source folder; no build-folder path reaches the
binaries; a cached object is the one the compiler made for the same command line).
Checked for cpu (tests/integration/test_build_pipeline.py) and by hand for cu13 and
rocm7.14. torch's header paths are mapped too (cmake/ptkit-torch.cmake). Open: the
same commit built in another checkout gave a library whose code is identical but whose
``.dynstr`` has 3 more bytes (and so a shifted ``.gnu.version`` and another build-id).
"""

from __future__ import annotations

from ptkit.release.pipeline.audit import audit_stage
from ptkit.release.pipeline.build import BuildReportRow, BuiltWheel, build_wheel, format_report
from ptkit.release.pipeline.compiler_cache import (
    CACHE_CHOICES,
    CompilerCache,
    find_compiler_cache,
)
from ptkit.release.pipeline.dist import publish
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.repair import RepairedWheel, repair_wheel
from ptkit.release.pipeline.run import (
    STAGES,
    PipelineResult,
    finish_wheel,
    run_pipeline,
    source_date_epoch,
)
from ptkit.release.pipeline.smoke import (
    SmokeResult,
    fresh_venv,
    smoke_command,
    smoke_test,
    wheel_package,
)

__all__ = [
    "CACHE_CHOICES",
    "STAGES",
    "BuildError",
    "BuildReportRow",
    "BuiltWheel",
    "CompilerCache",
    "PipelineResult",
    "RepairedWheel",
    "SmokeResult",
    "audit_stage",
    "build_wheel",
    "find_compiler_cache",
    "finish_wheel",
    "format_report",
    "fresh_venv",
    "publish",
    "repair_wheel",
    "run_pipeline",
    "smoke_command",
    "smoke_test",
    "source_date_epoch",
    "wheel_package",
]
