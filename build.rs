//! A release build embeds frontend/dist (see `src/http/ui.rs`) and must be built again when
//! the dashboard is: the embedding macro names each file it includes, not the folder, so a
//! dashboard built after a release build without one would go unnoticed. Debug builds read
//! the folder at run time and need nothing here.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    // Cargo watches a folder only if it exists (a missing path would rerun this every build).
    if let Err(e) = std::fs::create_dir_all("frontend/dist") {
        println!("cargo:warning=cannot create frontend/dist ({e}): the dashboard will not be embedded");
    }
    println!("cargo:rerun-if-changed=frontend/dist");
}
