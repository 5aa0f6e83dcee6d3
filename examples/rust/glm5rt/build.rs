//! Embeds the directory of the libglm5rt that glm5rt-sys found (via pkg-config) as an rpath of this
//! crate's examples and tests, so `cargo run --example generate` finds the shared library without
//! LD_LIBRARY_PATH. Libraries depending on this crate decide their own rpath.
fn main() {
    if let Ok(dir) = std::env::var("DEP_GLM5RT_LIBDIR") {
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,{dir}");
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
    }
}
