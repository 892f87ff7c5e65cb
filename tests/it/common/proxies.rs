//! The reverse proxy examples of `docker/` (nginx.conf, Caddyfile), run by Debian's nginx and
//! Caddy on loopback in front of a test's main node: each file as it is, but for the
//! upstreams (the API listener the test gives; the web interface at a closed port, which
//! nothing a node asks may reach) and the address it listens on.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::server::free_port;

/// A proxy process and the base URL it serves; killed when dropped.
pub struct Proxy {
    child: Child,
    pub base: String,
    dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where no web interface listens: the discard port, closed on the test machines.
const NO_UI: &str = "127.0.0.1:9";

fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Replaces `from` in `text`, which must hold it (the example changed otherwise).
fn swap(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "the example no longer holds {from:?}");
    text.replace(from, to)
}

impl Proxy {
    /// docker/nginx.conf in front of the API listener at `api` (`host:port`).
    pub fn nginx(api: &str) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let site = example("nginx.conf");
        let site = swap(&site, "server main:3100;", &format!("server {api};"));
        let site = swap(&site, "server main:4210;", &format!("server {NO_UI};"));
        let site = swap(&site, "    listen 80;\n    listen [::]:80;\n", &format!("    listen 127.0.0.1:{port};\n"));
        std::fs::write(dir.path().join("site.conf"), site).unwrap();
        // The main context the example goes into (as the nginx image's own nginx.conf
        // includes conf.d/), one process in the foreground, everything in the test's folder.
        let d = dir.path().display();
        let main = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{}}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
             fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  \
             include {d}/site.conf;\n}}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), main).unwrap();
        let mut cmd = Command::new("nginx");
        cmd.arg("-c").arg(dir.path().join("nginx.conf")).arg("-p").arg(dir.path());
        Proxy::start(cmd, port, dir, "error.log")
    }

    /// docker/Caddyfile in front of the API listener at `api` (`host:port`), over plain HTTP.
    pub fn caddy(api: &str) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let site = example("Caddyfile");
        let site = swap(&site, "reverse_proxy main:3100", &format!("reverse_proxy {api}"));
        let site = swap(&site, "reverse_proxy main:4210", &format!("reverse_proxy {NO_UI}"));
        let site = swap(&site, "condense.example.org {", &format!("http://127.0.0.1:{port} {{\n\tbind 127.0.0.1"));
        // No admin endpoint: it listens on a fixed port.
        let config = format!("{{\n\tadmin off\n}}\n\n{site}");
        std::fs::write(dir.path().join("Caddyfile"), config).unwrap();
        let mut cmd = Command::new("caddy");
        cmd.args(["run", "--adapter", "caddyfile", "--config"])
            .arg(dir.path().join("Caddyfile"))
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .stderr(std::fs::File::create(dir.path().join("caddy.log")).unwrap());
        Proxy::start(cmd, port, dir, "caddy.log")
    }

    fn start(mut cmd: Command, port: u16, dir: tempfile::TempDir, log: &str) -> Proxy {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).spawn().unwrap_or_else(|e| {
            panic!("{program} did not start ({e}); `make bootstrap-test` installs Debian's nginx-light and caddy")
        });
        let mut proxy = Proxy { child, base: format!("http://127.0.0.1:{port}"), dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let log = std::fs::read_to_string(proxy.dir.path().join(log)).unwrap_or_default();
            if let Ok(Some(status)) = proxy.child.try_wait() {
                panic!("{program} ended ({status}) before it listened: {log}");
            }
            assert!(Instant::now() < deadline, "{program} did not listen on {port}: {log}");
            std::thread::sleep(Duration::from_millis(50));
        }
        proxy
    }
}
