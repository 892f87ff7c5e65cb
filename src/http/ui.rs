//! The dashboard's static files, with every unknown path answered by index.html so the
//! single-page app's own routes survive a reload.

use std::path::{Path, PathBuf};

use actix_files::{Files, NamedFile};
use actix_web::{web, HttpResponse};

pub struct FrontendDir(pub PathBuf);

const NOT_BUILT: &str = "<!doctype html><html><head><title>condense</title></head><body>\
<h1>condense</h1><p>The dashboard has not been built. Run <code>make run</code>, or \
<code>npm run build</code> in <code>frontend/</code>, then reload.</p>\
<p>The API answers under <code>/api</code>.</p></body></html>";

pub fn configure(cfg: &mut web::ServiceConfig, dir: &Path) {
    if dir.join("index.html").is_file() {
        cfg.service(Files::new("/", dir).index_file("index.html").default_handler(web::to(index)));
    } else {
        cfg.default_service(web::to(|| async { HttpResponse::Ok().content_type("text/html").body(NOT_BUILT) }));
    }
}

async fn index(dir: web::Data<FrontendDir>) -> actix_web::Result<NamedFile> {
    Ok(NamedFile::open_async(dir.0.join("index.html")).await?)
}
