# terngrad-bench: the CUDA architectures of the codec's CUDA targets (included by codec/src/cuda).
# tg_cuda_architectures(<out-var>): CMAKE_CUDA_ARCHITECTURES when someone chose it (a -D on the command
# line or a preset, the CUDAARCHS environment variable, or a normal variable set by an enclosing
# project); otherwise 80-real;90-real;90-virtual: A100 and H100/H200 code, plus 9.0 PTX that the driver
# compiles for newer devices. The kernels use nothing newer than 8.0 needs (atomics, warp shuffles).
#
# Why the cache entry's help text: after enable_language(CUDA), an unset CMAKE_CUDA_ARCHITECTURES holds
# the compiler's own default (nvcc 13: 75) under CMake's help "CUDA architectures", while a value given
# with -D carries "No help, variable specified on the command line." (CMake 3.25 keeps no other trace).
function(tg_cuda_architectures out)
  set(default 80-real 90-real 90-virtual)
  get_property(help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
  if(NOT DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES})
    set(chosen TRUE)   # a normal variable only: the enclosing project's choice
  elseif(NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "$CACHE{CMAKE_CUDA_ARCHITECTURES}")
    set(chosen TRUE)   # a normal variable shadows the cache entry
  elseif(NOT "$ENV{CUDAARCHS}" STREQUAL "" OR NOT help STREQUAL "CUDA architectures")
    set(chosen TRUE)
  else()
    set(chosen FALSE)  # CMake's detected compiler default
  endif()
  if(chosen AND CMAKE_CUDA_ARCHITECTURES)
    set(${out} "${CMAKE_CUDA_ARCHITECTURES}" PARENT_SCOPE)
  else()
    set(${out} "${default}" PARENT_SCOPE)
  endif()
endfunction()
