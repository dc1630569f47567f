# Install-time step of ptkit_install_kernel_library: fill in the sha256 of the
# installed library and write the manifest next to it.
file(READ "${_ptkit_manifest_template}" _ptkit_m)
file(SHA256 "${_ptkit_library}" _ptkit_sha256)
string(JSON _ptkit_m SET "${_ptkit_m}" sha256 "\"${_ptkit_sha256}\"")
file(WRITE "${_ptkit_manifest}" "${_ptkit_m}\n")
message(STATUS "ptkit: manifest ${_ptkit_manifest} (sha256 ${_ptkit_sha256})")
