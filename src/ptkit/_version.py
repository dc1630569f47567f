"""The version of ptkit: the one place it is written.

The toolkit's wheel, ptkit-ops' wheels (``<version>+<variant label>``) and the CMake
package's version check (``cmake/ptkit-config-version.cmake`` reads this file) all
take it from here.
"""

__version__ = "0.1.0"
