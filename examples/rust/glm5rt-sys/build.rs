//! Finds the installed libglm5rt with the `pkg-config` program (no registry crates), the way a C
//! program links it: `pkg-config --libs glm5rt`, honouring PKG_CONFIG_PATH.
//! GLM5RT_STATIC=1 links libglm5rt.a with `pkg-config --static` instead.
use std::env;
use std::process::Command;

fn pkg_config(args: &[&str]) -> String {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&program)
        .args(args)
        .arg("glm5rt")
        .output()
        .unwrap_or_else(|e| panic!("glm5rt-sys: cannot run `{program}` ({e}); install pkg-config"));
    if !out.status.success() {
        panic!(
            "glm5rt-sys: `{program} {} glm5rt` failed: {}\n\
             Install libglm5rt (cmake --install BUILD --prefix PREFIX) and set \
             PKG_CONFIG_PATH=PREFIX/lib/pkgconfig.",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).expect("pkg-config printed non-UTF-8 output")
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=GLM5RT_STATIC");
    let statik = env::var("GLM5RT_STATIC").map(|v| v == "1").unwrap_or(false);
    let libs = if statik {
        pkg_config(&["--libs", "--static"])
    } else {
        pkg_config(&["--libs"])
    };
    let libdir = pkg_config(&["--variable=libdir"]);
    let libdir = libdir.trim();
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            if lib == "glm5rt" && statik {
                println!("cargo:rustc-link-lib=static=glm5rt");
            } else {
                println!("cargo:rustc-link-lib={lib}");
            }
        } else {
            println!("cargo:rustc-link-arg={flag}");
        }
    }
    // For dependents (DEP_GLM5RT_LIBDIR): they may embed it as an rpath in their binaries.
    println!("cargo:libdir={libdir}");
}
