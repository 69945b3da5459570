# terngrad-bench: install rules and the CMake package `terngrad` for consumers:
#   find_package(terngrad REQUIRED COMPONENTS codec)
#   target_link_libraries(app PRIVATE terngrad::codec)
# Installed: the codec library and its public headers (tg/*.hpp), and, when built, the battery
# (terngrad::verify, component verify). Consumers need the Random123 headers (Debian: libRandom123-dev).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(TG_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/terngrad)

install(TARGETS tg_codec EXPORT terngrad-codec-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/codec/include/tg DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
set_target_properties(tg_codec PROPERTIES EXPORT_NAME codec)
install(EXPORT terngrad-codec-targets NAMESPACE terngrad:: DESTINATION ${TG_INSTALL_CMAKEDIR}
        FILE terngrad-codec-targets.cmake)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/terngradConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/terngradConfig.cmake INSTALL_DESTINATION ${TG_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/terngradConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/terngradConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/terngradConfigVersion.cmake
        DESTINATION ${TG_INSTALL_CMAKEDIR})

# The consumer test: install to a scratch prefix, then configure, build and run a 20-line program
# (cmake/consumer/) against it with find_package(terngrad REQUIRED COMPONENTS codec).
if(TG_BUILD_TESTS)
  set(_tg_prefix ${CMAKE_CURRENT_BINARY_DIR}/consumer-test/prefix)
  set(_tg_build ${CMAKE_CURRENT_BINARY_DIR}/consumer-test/build)
  add_test(NAME install_consumer
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DPREFIX=${_tg_prefix}
            -DCONSUMER_SOURCE=${PROJECT_SOURCE_DIR}/cmake/consumer -DCONSUMER_BUILD=${_tg_build}
            -DGENERATOR=${CMAKE_GENERATOR} -DCXX=${CMAKE_CXX_COMPILER} "-DSANITIZE=${TG_SANITIZE}"
            -P ${PROJECT_SOURCE_DIR}/cmake/consumer_test.cmake)
  set_tests_properties(install_consumer PROPERTIES LABELS "codec;install" TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "consumer: round trip ok")
endif()

# The library without the test-only dependencies: a scratch configure with GTest, rapidcheck,
# benchmark and CLI11 hidden (CMAKE_DISABLE_FIND_PACKAGE_*: a find_package of any of them would fail
# the configure), then the codec and the battery library built.
if(TG_BUILD_TESTS)
  set(_tg_scratch ${CMAKE_CURRENT_BINARY_DIR}/no-test-deps)
  add_test(NAME configure_without_test_deps
    COMMAND sh -c "rm -rf \"$1\" && \"$2\" -S \"$3\" -B \"$1\" -G \"$4\" -DTG_BUILD_TESTS=OFF -DTG_ENABLE_CUDA=OFF -DTG_BUILD_TRAIN=OFF -DTG_BUILD_PYTHON=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_rapidcheck=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON >\"$1.log\" 2>&1 || { cat \"$1.log\"; exit 1; }; \"$2\" --build \"$1\" --target tg_codec tg_verify >>\"$1.log\" 2>&1 || { tail -30 \"$1.log\"; exit 1; }; echo 'configured and built without GTest, rapidcheck, benchmark, CLI11'"
            sh ${_tg_scratch} ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR} ${CMAKE_GENERATOR})
  set_tests_properties(configure_without_test_deps PROPERTIES LABELS "install" TIMEOUT 600
                       PASS_REGULAR_EXPRESSION "configured and built without")
endif()
