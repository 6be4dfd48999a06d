# SPDX-License-Identifier: Apache-2.0
# Finds UCX's ucp and ucs libraries (ucx::ucp, ucx::ucs) and sets ucx_FOUND.
#
# UCX's own CMake package is used, then repaired where it names files that do not exist: the
# package of Debian 13 (UCX 1.18) computes its prefix as three folders above
# lib/x86_64-linux-gnu/cmake/ucx, i.e. /usr/lib, so it points at /usr/lib/include and
# /usr/lib/lib/x86_64-linux-gnu/libucp.so. A wrong path found that way is replaced by what
# find_path / find_library find in the usual places (CMAKE_PREFIX_PATH included).
find_package(ucx QUIET)
if(ucx_FOUND)
  find_path(UCX_INCLUDE_DIR ucp/api/ucp.h HINTS ${UCX_INCLUDE_DIRS})
  foreach(_lib ucp ucs)
    if(NOT TARGET ucx::${_lib})
      set(ucx_FOUND FALSE)
      break()
    endif()
    get_target_property(_loc ucx::${_lib} IMPORTED_LOCATION)
    if(NOT _loc OR NOT EXISTS "${_loc}")
      find_library(UCX_${_lib}_LIBRARY ${_lib})
      if(NOT UCX_${_lib}_LIBRARY)
        set(ucx_FOUND FALSE)
        break()
      endif()
      message(STATUS "Tessera: UCX's CMake package names ${_loc}; using ${UCX_${_lib}_LIBRARY}")
      set_target_properties(ucx::${_lib} PROPERTIES IMPORTED_LOCATION "${UCX_${_lib}_LIBRARY}")
    endif()
    get_target_property(_inc ucx::${_lib} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _inc OR NOT EXISTS "${_inc}")
      if(NOT UCX_INCLUDE_DIR)
        set(ucx_FOUND FALSE)
        break()
      endif()
      set_target_properties(ucx::${_lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${UCX_INCLUDE_DIR}")
    endif()
  endforeach()
endif()
