//! The dashboard's static files, with every unknown path answered by index.html so the
//! single-page app's own routes survive a reload.
//!
//! The built dashboard (frontend/dist) is embedded in release builds, so the binary serves
//! it from any working directory; a debug build reads the same folder from disk, so a
//! rebuilt dashboard shows without recompiling. `FRONTEND_DIR` replaces it with a folder of
//! its own.

use std::path::PathBuf;

use actix_files::{Files, NamedFile};
use actix_web::http::header::{self, EntityTag, IfNoneMatch};
use actix_web::{web, HttpRequest, HttpResponse};
use rust_embed::Embed;

/// frontend/dist as it was when this binary was built; empty when it had not been built.
#[derive(Embed)]
#[folder = "frontend/dist/"]
#[allow_missing = true]
struct Embedded;

/// Where the dashboard's files come from.
#[derive(Debug, Clone)]
pub enum Dashboard {
    /// The files built into the binary.
    Embedded,
    /// A folder on disk (`FRONTEND_DIR`).
    Folder(PathBuf),
}

impl Dashboard {
    /// The folder when one is given, else what the binary holds.
    pub fn new(folder: Option<PathBuf>) -> Dashboard {
        folder.map_or(Dashboard::Embedded, Dashboard::Folder)
    }

    fn is_built(&self) -> bool {
        match self {
            Dashboard::Embedded => Embedded::get("index.html").is_some(),
            Dashboard::Folder(dir) => dir.join("index.html").is_file(),
        }
    }
}

/// The paths of the files the binary holds (relative, `/`-separated), for the tests.
pub fn embedded_files() -> Vec<String> {
    Embedded::iter().map(std::borrow::Cow::into_owned).collect()
}

const NOT_BUILT: &str = "<!doctype html><html><head><title>condense</title></head><body>\
<h1>condense</h1><p>The dashboard has not been built. Run <code>make build</code>, or \
<code>npm run build</code> in <code>frontend/</code> and build condense again (or point \
<code>FRONTEND_DIR</code> at the built folder), then reload.</p>\
<p>The API answers under <code>/api</code>.</p></body></html>";

pub fn configure(cfg: &mut web::ServiceConfig, dashboard: &Dashboard) {
    if !dashboard.is_built() {
        cfg.default_service(web::to(|| async { HttpResponse::Ok().content_type("text/html").body(NOT_BUILT) }));
        return;
    }
    match dashboard {
        Dashboard::Embedded => {
            cfg.default_service(web::to(embedded));
        }
        Dashboard::Folder(dir) => {
            let index = dir.join("index.html");
            cfg.service(Files::new("/", dir).index_file("index.html").default_handler(web::to(move || {
                let index = index.clone();
                async move { NamedFile::open_async(index).await }
            })));
        }
    }
}

/// A file of the embedded dashboard, or index.html for any other path (the app's routes).
async fn embedded(req: HttpRequest) -> HttpResponse {
    let path = req.path().trim_start_matches('/');
    let (name, file) = match Embedded::get(path).filter(|_| !path.is_empty()) {
        Some(file) => (path, file),
        None => match Embedded::get("index.html") {
            Some(file) => ("index.html", file),
            None => return HttpResponse::NotFound().finish(),
        },
    };
    let tag = EntityTag::new_strong(file.metadata.sha256_hash().iter().map(|b| format!("{b:02x}")).collect());
    let unchanged = match <IfNoneMatch as header::Header>::parse(&req) {
        Ok(IfNoneMatch::Items(tags)) => tags.iter().any(|t| t.weak_eq(&tag)),
        Ok(IfNoneMatch::Any) => true,
        Err(_) => false,
    };
    // Vite names its bundles by their content: they never change under a name. index.html
    // names the current bundles, so it is checked each time.
    let cache = if name.starts_with("assets/") { "public, max-age=31536000, immutable" } else { "no-cache" };
    let mut response = if unchanged { HttpResponse::NotModified() } else { HttpResponse::Ok() };
    response.insert_header((header::ETAG, tag)).insert_header((header::CACHE_CONTROL, cache));
    if unchanged {
        return response.finish();
    }
    response.content_type(file.metadata.mimetype()).body(file.data.into_owned())
}
