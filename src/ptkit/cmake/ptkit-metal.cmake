# Metal (Apple GPUs): on macOS with Xcode's `xcrun metal`, .metal sources are compiled
# into one .metallib; anywhere else the sources themselves ship and torch compiles them
# at first use (torch.mps.compile_shader). Either way one file is installed, with a
# manifest, and ptkit's runtime registers it as the MPS implementation.
include_guard(GLOBAL)

# _ptkit_find_metal(<found_var> <reason_var>): always finds a way. Sets PTKIT_METAL_MODE
# (metallib or source) and PTKIT_METAL_VERSION in the caller.
function(_ptkit_find_metal found_var reason_var)
  set(mode "source")
  set(version "source")
  if(APPLE)
    find_program(_ptkit_xcrun xcrun NO_CACHE)
    if(_ptkit_xcrun)
      execute_process(COMMAND "${_ptkit_xcrun}" -sdk macosx metal --version
                      OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
      if(rc EQUAL 0 AND out MATCHES "metal[^0-9]*([0-9][0-9.]*)")
        set(mode "metallib")
        set(version "${CMAKE_MATCH_1}")
        set(PTKIT_XCRUN "${_ptkit_xcrun}" PARENT_SCOPE)
      endif()
    endif()
  endif()
  set(${found_var} TRUE PARENT_SCOPE)
  set(${reason_var} "" PARENT_SCOPE)
  set(PTKIT_METAL_MODE "${mode}" PARENT_SCOPE)
  set(PTKIT_METAL_VERSION "${version}" PARENT_SCOPE)
endfunction()

# ptkit_add_metal_library(<name> SOURCES <file.metal>… FILE_VAR <v>)
# Creates target <name> producing <name>.metallib (xcrun) or <name>.metal (the sources,
# concatenated); FILE_VAR receives the produced file's path. Needs
# ptkit_enable_backend(metal) first (it picks the mode).
function(ptkit_add_metal_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "FILE_VAR" "SOURCES")
  set(fn "ptkit_add_metal_library(${name})")
  _ptkit_check_arguments("${fn}" SOURCES FILE_VAR)
  if(NOT PTKIT_METAL_MODE)
    message(FATAL_ERROR "${fn}: call ptkit_enable_backend(metal) first (it chooses between a "
                        ".metallib and shipped sources)")
  endif()
  set(sources "")
  foreach(source IN LISTS arg_SOURCES)
    get_filename_component(source "${source}" ABSOLUTE)
    list(APPEND sources "${source}")
  endforeach()
  if(PTKIT_METAL_MODE STREQUAL "metallib")
    set(airs "")
    foreach(source IN LISTS sources)
      get_filename_component(stem "${source}" NAME_WE)
      set(air "${CMAKE_CURRENT_BINARY_DIR}/${name}.metal.d/${stem}.air")
      add_custom_command(OUTPUT "${air}"
        COMMAND "${PTKIT_XCRUN}" -sdk macosx metal -std=metal3.1 -O2 -fno-fast-math -c "${source}" -o "${air}"
        DEPENDS "${source}" VERBATIM)
      list(APPEND airs "${air}")
    endforeach()
    set(file "${CMAKE_CURRENT_BINARY_DIR}/${name}.metallib")
    add_custom_command(OUTPUT "${file}"
      COMMAND "${PTKIT_XCRUN}" -sdk macosx metallib ${airs} -o "${file}"
      DEPENDS ${airs} VERBATIM)
  else()
    # The sources as one file (torch.mps.compile_shader takes one source string),
    # written at generate time; editing a source re-runs configure.
    set(file "${CMAKE_CURRENT_BINARY_DIR}/${name}.metal")
    set(content "")
    foreach(source IN LISTS sources)
      file(READ "${source}" text)
      string(APPEND content "${text}")
    endforeach()
    file(GENERATE OUTPUT "${file}" CONTENT "${content}")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${sources})
  endif()
  add_custom_target(${name} ALL DEPENDS "${file}")
  set(${arg_FILE_VAR} "${file}" PARENT_SCOPE)
endfunction()
