# find_package(ptkit <version>): the version comes from the one place it is written,
# the Python package's _version.py beside this folder (ptkit/cmake/ -> ptkit/_version.py),
# so CMake and the wheel cannot disagree. Compatible: the same major version and at least
# the requested one; while the major is 0, the same minor too (0.x releases may break the
# CMake functions, as semantic versioning allows).
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../_version.py" _ptkit_version_line
     REGEX "^__version__ = \"[0-9]+\\.[0-9]+(\\.[0-9]+)?\"$" LIMIT_COUNT 1)
if(NOT _ptkit_version_line MATCHES "\"([0-9]+\\.[0-9]+(\\.[0-9]+)?)\"")
  set(PACKAGE_VERSION "unknown")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()
set(PACKAGE_VERSION "${CMAKE_MATCH_1}")
string(REPLACE "." ";" _ptkit_parts "${PACKAGE_VERSION}")
list(GET _ptkit_parts 0 _ptkit_major)
list(GET _ptkit_parts 1 _ptkit_minor)

set(PACKAGE_VERSION_COMPATIBLE FALSE)
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION_MAJOR EQUAL _ptkit_major
       AND NOT PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION
       AND (NOT _ptkit_major EQUAL 0 OR PACKAGE_FIND_VERSION_COUNT LESS 2
            OR PACKAGE_FIND_VERSION_MINOR EQUAL _ptkit_minor))
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
