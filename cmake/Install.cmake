# cmake --install: headers, both libraries, glm5rt.pc and the CMake package glm5rt::glm5rt.
include(CMakePackageConfigHelpers)

install(DIRECTORY include/glm5rt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS glm5rt glm5rt_static glm5rt_deps EXPORT glm5rtTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT glm5rtTargets NAMESPACE glm5rt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/glm5rt)
configure_package_config_file(cmake/glm5rtConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/glm5rtConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/glm5rt)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/glm5rtConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/glm5rtConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/glm5rtConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/glm5rt)

# pkg-config: the static link line lists every private dependency, so `pkg-config --static` links.
set(GLM5RT_PC_REQUIRES_PRIVATE "libzstd libpcre2-8 icu-uc")
set(GLM5RT_PC_LIBS_PRIVATE "-lmimalloc -lstdc++ -lm -lpthread -ldl")
if(GLM5RT_CUDA_ENABLED)
  string(APPEND GLM5RT_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcublasLt -lcudart_static -lrt")
endif()
# The .pc file locates its prefix relative to itself, so an installed tree can be moved.
file(RELATIVE_PATH GLM5RT_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(pkgconfig/glm5rt.pc.in ${CMAKE_CURRENT_BINARY_DIR}/glm5rt.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/glm5rt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
