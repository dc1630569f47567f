# The build report: what happened to each backend, printed as a table at the end of
# configure and written to <build>/ptkit-build-report.json (read by `ptkit build`).
#
#   backend  status   detail
#   cpu      built    ptkit_cpu: isa x86-64-v3, default (gnu 12.2.0)
#   hip      built    ptkit_hip: gfx90a (HIP 5.2.21153, system)
#   xpu      skipped  icpx (Intel oneAPI DPC++/C++ compiler) not found …
include_guard(GLOBAL)

# A row is "backend|status|detail" in a global list: the detail's own ";" and "|" are
# kept as these two characters until the row is printed.
string(ASCII 30 _PTKIT_REPORT_SEMICOLON)
string(ASCII 31 _PTKIT_REPORT_BAR)

# ptkit_report_backend(<backend> <built|skipped|failed> <detail>)
function(ptkit_report_backend backend status detail)
  if(NOT backend IN_LIST PTKIT_BACKENDS)
    message(FATAL_ERROR "ptkit_report_backend(${backend}): backend must be one of ${PTKIT_BACKENDS_TEXT}")
  endif()
  if(NOT status MATCHES "^(built|skipped|failed)$")
    message(FATAL_ERROR "ptkit_report_backend(${backend}): status must be built, skipped or failed")
  endif()
  string(REPLACE ";" "${_PTKIT_REPORT_SEMICOLON}" detail "${detail}")
  string(REPLACE "|" "${_PTKIT_REPORT_BAR}" detail "${detail}")
  set_property(GLOBAL APPEND PROPERTY PTKIT_BUILD_REPORT "${backend}|${status}|${detail}")
endfunction()

function(_ptkit_print_build_report)
  get_property(rows GLOBAL PROPERTY PTKIT_BUILD_REPORT)
  set(reported "")
  foreach(row IN LISTS rows)
    string(REGEX MATCH "^[^|]*" backend "${row}")
    list(APPEND reported "${backend}")
  endforeach()
  # One row per backend ptkit knows (PTKIT_BACKENDS, from ptkit.backends).
  foreach(backend IN LISTS PTKIT_BACKENDS)
    if(NOT backend IN_LIST reported)
      set(why "not requested by this project")
      if(PTKIT_VARIANT)
        set(why "not part of variant ${PTKIT_VARIANT}")
      endif()
      list(APPEND rows "${backend}|skipped|${why}")
    endif()
  endforeach()

  set(json "{\"variant\": \"${PTKIT_VARIANT}\", \"backends\": []}")
  set(i 0)
  set(label "")
  if(PTKIT_VARIANT)
    set(label " (variant ${PTKIT_VARIANT})")
  endif()
  message(STATUS "ptkit build report${label}:")
  message(STATUS "  backend  status   detail")
  foreach(row IN LISTS rows)
    string(REPLACE "|" ";" cells "${row}")
    list(GET cells 0 backend)
    list(GET cells 1 status)
    list(LENGTH cells n)
    set(detail "")
    if(n GREATER 2)
      list(GET cells 2 detail)
      string(REPLACE "${_PTKIT_REPORT_SEMICOLON}" ";" detail "${detail}")
      string(REPLACE "${_PTKIT_REPORT_BAR}" "|" detail "${detail}")
    endif()
    string(LENGTH "${backend}" len)
    math(EXPR pad "9 - ${len}")
    string(REPEAT " " ${pad} backend_pad)
    string(LENGTH "${status}" len)
    math(EXPR pad "9 - ${len}")
    string(REPEAT " " ${pad} status_pad)
    message(STATUS "  ${backend}${backend_pad}${status}${status_pad}${detail}")
    string(REPLACE "\\" "\\\\" detail_json "${detail}")
    string(REPLACE "\"" "\\\"" detail_json "${detail_json}")
    string(JSON json SET "${json}" backends ${i}
      "{\"backend\": \"${backend}\", \"status\": \"${status}\", \"detail\": \"${detail_json}\"}")
    math(EXPR i "${i} + 1")
  endforeach()
  file(WRITE "${CMAKE_BINARY_DIR}/ptkit-build-report.json" "${json}\n")
endfunction()

# Printed once, when the top-level directory has been processed: every project that
# finds ptkit gets the table without calling anything.
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _ptkit_print_build_report)
