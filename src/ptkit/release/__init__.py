"""The release: from a built project to wheels others can install.

- :mod:`.pipeline`: ``ptkit build``, one module per stage (build, repair, audit, smoke,
  dist), the compiler cache, and the run of all five;
- :mod:`.matrix`: ``ptkit matrix``, the release plan and the cibuildwheel files and
  workflow generated from it;
- :mod:`.wheel_audit` (:mod:`.elf_audit`, :mod:`.fatbin`, :mod:`.offload`): what a wheel
  must pass before it is published, by the platform of its tag;
- :mod:`.inspection`: ``ptkit inspect``;
- :mod:`.torch_libraries`: the libraries a wheel takes from the user's torch;
- :mod:`.version_provider`: scikit-build-core's version with the variant's label.
"""
