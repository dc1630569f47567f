# Install-time step of ptkit_install_kernel_library: fill in the sha256 of the
# installed library and write the manifest next to it.
file(READ "${_ptkit_manifest_template}" _ptkit_m)
file(SHA256 "${_ptkit_library}" _ptkit_sha256)
string(JSON _ptkit_m SET "${_ptkit_m}" sha256 "\"${_ptkit_sha256}\"")
file(WRITE "${_ptkit_manifest}" "${_ptkit_m}\n")
message(STATUS "ptkit: manifest ${_ptkit_manifest} (sha256 ${_ptkit_sha256})")

# What the library really registers (ptkit.release.registrations): loaded alone into the
# build Python's torch in a child process, recorded in the manifest; the op table is taken
# from it when OPS was not given, and checked against it when it was. A library that
# crashes its child fails the install with the signal and the command to reproduce it.
get_filename_component(_ptkit_build_dir "${_ptkit_manifest_template}" DIRECTORY)
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${_ptkit_python_path}" "${_ptkit_python}"
          -m ptkit.release.registrations record "${_ptkit_manifest}" --dtypes "${_ptkit_dtypes}"
          --build-dir "${_ptkit_build_dir}"
  RESULT_VARIABLE _ptkit_rc OUTPUT_VARIABLE _ptkit_out ERROR_VARIABLE _ptkit_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _ptkit_rc EQUAL 0)
  file(REMOVE "${_ptkit_manifest}")
  message(FATAL_ERROR "ptkit: ${_ptkit_err}${_ptkit_out}")
endif()
message(STATUS "ptkit: ${_ptkit_out}")

# GPU code: the targets actually inside the library must be the manifest's (an arch list
# lost on the way to the compiler must fail the build, not ship a wheel without GPU code).
set(_ptkit_audit_command "")
if(_ptkit_audit STREQUAL "cuda")
  set(_ptkit_audit_command -m ptkit.release.fatbin check "${_ptkit_manifest}"
                           --cuobjdump "${_ptkit_cuda_root}/bin/cuobjdump")
elseif(_ptkit_audit STREQUAL "hip")
  set(_ptkit_audit_command -m ptkit.release.offload check "${_ptkit_manifest}")
endif()
if(_ptkit_audit_command)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${_ptkit_python_path}" "${_ptkit_python}"
            ${_ptkit_audit_command}
    RESULT_VARIABLE _ptkit_rc OUTPUT_VARIABLE _ptkit_out ERROR_VARIABLE _ptkit_out)
  if(NOT _ptkit_rc EQUAL 0)
    file(REMOVE "${_ptkit_manifest}")
    message(FATAL_ERROR "ptkit: ${_ptkit_audit} code audit failed for ${_ptkit_library}:\n${_ptkit_out}")
  endif()
  message(STATUS "ptkit: ${_ptkit_out}")
endif()
