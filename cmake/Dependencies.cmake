# System dependencies of the core, all from Debian packages (scripts/setup.sh installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(mimalloc REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# ICU's common library: Unicode normalization (NFC/NFKC) and character properties for the tokenizer.
pkg_check_modules(ICU_UC REQUIRED IMPORTED_TARGET icu-uc)

# Everything the core links privately. Static consumers get the same list through glm5rt.pc's
# Libs.private / Requires.private and the CMake package's dependencies.
add_library(glm5rt_deps INTERFACE)
target_link_libraries(glm5rt_deps INTERFACE nlohmann_json::nlohmann_json mimalloc PkgConfig::ZSTD
                      PkgConfig::PCRE2 PkgConfig::ICU_UC Threads::Threads ${CMAKE_DL_LIBS})
if(GLM5RT_CUDA_ENABLED)
  target_link_libraries(glm5rt_deps INTERFACE CUDA::cudart_static CUDA::cublasLt)
endif()
