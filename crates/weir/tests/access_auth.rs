//! The built-in `access` module's Basic authentication through the `weir` binary:
//! htpasswd files written by the tests (bcrypt and SHA-crypt hashes), the real origin,
//! a forward and a reverse listener.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::module_config::{forward_and_reverse_with_modules, write_config};
use common::*;

fn bcrypt_hash(password: &str) -> String {
    bcrypt::hash_with_salt(password, 4, [7; 16])
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY)
}

fn sha_crypt_hash(password: &str, sha512: bool) -> String {
    use sha_crypt::PasswordHasher;
    let hasher = if sha512 {
        sha_crypt::ShaCrypt::SHA512
    } else {
        sha_crypt::ShaCrypt::SHA256
    };
    hasher
        .hash_password_with_salt(password.as_bytes(), b"weir-test-salt16")
        .unwrap()
        .to_string()
}

/// ann (bcrypt), bob (SHA-256-crypt) and carl (SHA-512-crypt), each with the
/// password `<name>-pw`.
fn users_file(dir: &Path) -> PathBuf {
    let path = dir.join("users.htpasswd");
    let text = format!(
        "# users of the tests\nann:{}\nbob:{}\ncarl:{}\n",
        bcrypt_hash("ann-pw"),
        sha_crypt_hash("bob-pw", false),
        sha_crypt_hash("carl-pw", true)
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// The origin, a proxy authenticating against `users_file` with `extra` settings
/// and rules, and the file's path.
fn setup(extra: &str) -> (TestOrigin, Proxy, Htpasswd) {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("from the origin"));
    let dir = TempDir::new("access-auth");
    let file = users_file(dir.path());
    let proxy = forward_and_reverse_with_modules(
        &origin.base(),
        &format!(
            "[[module]]\nname = \"access\"\nhtpasswd = {:?}\nrealm = \"Staff only\"\n{extra}\n",
            file.display().to_string()
        ),
    );
    (origin, proxy, Htpasswd { file, _dir: dir })
}

/// The users file of a test, removed with its directory when the test ends.
struct Htpasswd {
    file: PathBuf,
    _dir: TempDir,
}

async fn forward_as(proxy: &Proxy, url: &str, user: &str, password: &str) -> Fetched {
    let client = proxied_client(proxy.forward_addr());
    get(
        &client,
        url,
        &[("proxy-authorization", &basic(user, password))],
    )
    .await
}

#[tokio::test]
async fn good_credentials_pass_and_are_never_forwarded() {
    let (origin, proxy, _users) = setup("");
    let r = forward_as(&proxy, &origin.url("/f"), "ann", "ann-pw").await;
    assert_eq!(r.status, 200);
    let seen = origin.last("/f").unwrap();
    assert_eq!(seen.header("proxy-authorization"), None);
    // Reverse: the client's Authorization was for the proxy, and stays there.
    let request = format!(
        "GET /r HTTP/1.1\r\nHost: site.test\r\nAuthorization: {}\r\nConnection: close\r\n\r\n",
        basic("carl", "carl-pw")
    );
    assert_eq!(
        raw_exchange(proxy.reverse_addr(), request.as_bytes()).status,
        200
    );
    assert_eq!(origin.last("/r").unwrap().header("authorization"), None);
    assert!(!proxy.stderr_text().contains("ann-pw") && !proxy.stderr_text().contains("carl-pw"));
}

/// Requests that Weir's own HTTP/1.1 parser leaves to hyper's (a body, two lines of
/// the field) carry their credentials in the request's fields, from which the module
/// takes them: not forwarded either.
#[tokio::test]
async fn credentials_on_every_parser_path_are_never_forwarded() {
    let (origin, proxy, _users) = setup("");
    let ann = basic("ann", "ann-pw");
    let post = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nProxy-Authorization: {ann}\r\n\
         Content-Length: 4\r\nConnection: close\r\n\r\nbody",
        origin.url("/fp"),
        origin.base().trim_start_matches("http://"),
    );
    assert_eq!(
        raw_exchange(proxy.forward_addr(), post.as_bytes()).status,
        200
    );
    assert_eq!(
        origin.last("/fp").unwrap().header("proxy-authorization"),
        None
    );
    let post = format!(
        "POST /rp HTTP/1.1\r\nHost: site.test\r\nAuthorization: {ann}\r\n\
         Content-Length: 4\r\nConnection: close\r\n\r\nbody"
    );
    assert_eq!(
        raw_exchange(proxy.reverse_addr(), post.as_bytes()).status,
        200
    );
    assert_eq!(origin.last("/rp").unwrap().header("authorization"), None);
    let twice = format!(
        "GET /r2 HTTP/1.1\r\nHost: site.test\r\nAuthorization: {ann}\r\n\
         Authorization: {}\r\nConnection: close\r\n\r\n",
        basic("bob", "bob-pw")
    );
    assert_eq!(
        raw_exchange(proxy.reverse_addr(), twice.as_bytes()).status,
        200
    );
    assert_eq!(origin.last("/r2").unwrap().header("authorization"), None);
}

/// A field the parser sets aside for the module is still part of the head the client
/// sent: it counts toward `max_request_header` like any other.
#[tokio::test]
async fn credentials_set_aside_count_toward_the_head_limit() {
    let (origin, proxy, _users) = setup("[limits]\nmax_request_header = \"8KiB\"");
    let request = |credentials: &str| {
        format!(
            "GET /big HTTP/1.1\r\nHost: site.test\r\nAuthorization: {credentials}\r\n\
             Connection: close\r\n\r\n"
        )
    };
    let r = raw_exchange(
        proxy.reverse_addr(),
        request(&"x".repeat(9 * 1024)).as_bytes(),
    );
    assert_eq!(r.status, 431);
    assert_eq!(
        r.text().trim(),
        "request header section is larger than 8192 bytes"
    );
    let r = raw_exchange(
        proxy.reverse_addr(),
        request(&basic("ann", "ann-pw")).as_bytes(),
    );
    assert_eq!(r.status, 200);
    assert_eq!(origin.count("/big"), 1);
}

/// A route whose chain does not have the module: the credentials the parser set aside
/// for the listener's chain go back into the request, and on to the origin, as they
/// would with no module at all.
#[tokio::test]
async fn a_route_without_the_module_forwards_the_credentials() {
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("from the origin"));
    let dir = TempDir::new("access-auth-route");
    let file = users_file(dir.path());
    let proxy = Proxy::builder()
        .reverse(&origin.base())
        .listener_line(&format!(
            "[[listen.route]]\npath_prefix = \"/open/\"\norigin = {:?}\nmodules = []",
            origin.base()
        ))
        .raw(&format!(
            "[[module]]\nname = \"access\"\nhtpasswd = {:?}\n",
            file.display().to_string()
        ))
        .start();
    let ann = basic("ann", "ann-pw");
    let get = |path: &str, credentials: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: site.test\r\n{credentials}Connection: close\r\n\r\n")
    };
    let with = format!("Authorization: {ann}\r\n");
    let r = raw_exchange(proxy.reverse_addr(), get("/open/a", &with).as_bytes());
    assert_eq!(r.status, 200);
    let seen = origin.last("/open/a").unwrap();
    assert_eq!(seen.header("authorization").as_deref(), Some(ann.as_str()));
    // The listener's own chain still asks for them, and takes them.
    let r = raw_exchange(proxy.reverse_addr(), get("/closed", "").as_bytes());
    assert_eq!(r.status, 401);
    let r = raw_exchange(proxy.reverse_addr(), get("/closed", &with).as_bytes());
    assert_eq!(r.status, 200);
    assert_eq!(
        origin.last("/closed").unwrap().header("authorization"),
        None
    );
}

#[tokio::test]
async fn a_challenge_is_407_on_forward_listeners_and_401_on_reverse_ones() {
    let (origin, proxy, _users) = setup("");
    let client = proxied_client(proxy.forward_addr());
    let r = get(&client, &origin.url("/c"), &[]).await;
    assert_eq!(r.status, 407);
    assert_eq!(
        r.header("proxy-authenticate").as_deref(),
        Some("Basic realm=\"Staff only\", charset=\"UTF-8\"")
    );
    assert_eq!(r.header("www-authenticate"), None);
    let r = raw_exchange(
        proxy.reverse_addr(),
        b"GET /c HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"Staff only\", charset=\"UTF-8\"")
    );
    assert_eq!(r.header("proxy-authenticate"), None);
    assert_eq!(origin.count("/c"), 0);
}

#[tokio::test]
async fn bad_credentials_are_refused_more_slowly_each_time() {
    let (origin, proxy, _users) = setup("failure_delay = \"150ms\"\nfailure_delay_max = \"2s\"");
    let mut took = Vec::new();
    for password in ["wrong-1", "wrong-2", "wrong-3"] {
        let start = Instant::now();
        let r = forward_as(&proxy, &origin.url("/b"), "ann", password).await;
        took.push(start.elapsed());
        assert_eq!(r.status, 407);
    }
    // 150 ms, then 300 ms, then 600 ms.
    assert!(took[0] >= Duration::from_millis(150), "{took:?}");
    assert!(took[2] >= Duration::from_millis(600), "{took:?}");
    let unknown = forward_as(&proxy, &origin.url("/b"), "nobody", "x").await;
    assert_eq!(unknown.status, 407);
    let start = Instant::now();
    let good = forward_as(&proxy, &origin.url("/b"), "ann", "ann-pw").await;
    assert_eq!(good.status, 200);
    assert!(
        start.elapsed() < Duration::from_millis(600),
        "a success is not slowed"
    );
    assert_eq!(origin.count("/b"), 1);
}

#[tokio::test]
async fn a_changed_htpasswd_file_is_read_again() {
    let (origin, proxy, users) = setup("");
    let file = &users.file;
    let url = origin.url("/changed");
    assert_eq!(forward_as(&proxy, &url, "bob", "bob-pw").await.status, 200);
    // Replaced as editors and `htpasswd` do: a new file renamed over the old one.
    let next = file.with_extension("new");
    std::fs::write(&next, format!("bob:{}\n", sha_crypt_hash("new-pw", true))).unwrap();
    std::fs::rename(&next, file).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while forward_as(&proxy, &url, "bob", "new-pw").await.status != 200 {
        assert!(
            Instant::now() < deadline,
            "the new password was never accepted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The old password was verified and cached before: the change forgets it.
    assert_eq!(forward_as(&proxy, &url, "bob", "bob-pw").await.status, 407);
    assert_eq!(forward_as(&proxy, &url, "ann", "ann-pw").await.status, 407);
}

#[tokio::test]
async fn a_verification_is_cached() {
    let (origin, proxy, _users) = setup("");
    for _ in 0..5 {
        let r = forward_as(&proxy, &origin.url("/cached"), "ann", "ann-pw").await;
        assert_eq!(r.status, 200);
    }
    let verified = metric(
        &proxy.metrics(),
        "weir_module_access_auth_verified_total",
        &[],
    );
    assert_eq!(
        verified,
        Some(1.0),
        "one check of the file for five requests"
    );
}

#[tokio::test]
async fn users_and_groups_in_rules() {
    let (origin, proxy, _users) = setup(
        "[module.groups]\nstaff = [\"bob\"]\n\
         [[module.rule]]\naction = \"allow\"\nusers = [\"ann\"]\n\
         [[module.rule]]\naction = \"allow\"\ngroups = [\"staff\"]\n\
         [[module.rule]]\naction = \"deny\"",
    );
    let url = origin.url("/u");
    assert_eq!(forward_as(&proxy, &url, "ann", "ann-pw").await.status, 200);
    assert_eq!(forward_as(&proxy, &url, "bob", "bob-pw").await.status, 200);
    // A valid user whom no rule allows is denied, not asked again.
    assert_eq!(
        forward_as(&proxy, &url, "carl", "carl-pw").await.status,
        403
    );
    let client = proxied_client(proxy.forward_addr());
    assert_eq!(get(&client, &url, &[]).await.status, 407);
    assert_eq!(origin.count("/u"), 2);
}

#[tokio::test]
async fn the_user_is_in_the_access_log() {
    let (origin, mut proxy, _users) = setup("");
    let url = origin.url("/logged");
    assert_eq!(forward_as(&proxy, &url, "ann", "ann-pw").await.status, 200);
    let client = proxied_client(proxy.forward_addr());
    assert_eq!(get(&client, &url, &[]).await.status, 407);
    drop(client);
    proxy.terminate();
    proxy
        .exited(Duration::from_secs(10))
        .await
        .expect("weir did not exit");
    let text = std::fs::read_to_string(proxy.access_log_path()).unwrap();
    // Sorted: the two requests came on two connections, which the two workers may
    // serve and log in either order.
    let mut users: Vec<(String, String)> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.get(6) == Some(&url.as_str()))
        .map(|f| {
            (
                f[3].rsplit('/').next().unwrap().to_string(),
                f[7].to_string(),
            )
        })
        .collect();
    users.sort();
    assert_eq!(
        users,
        [
            ("200".to_string(), "ann".to_string()),
            ("407".to_string(), "-".to_string())
        ],
        "{text}"
    );
    assert!(
        !text.contains("ann-pw") && !text.contains("Basic"),
        "{text}"
    );
}

#[test]
fn check_refuses_unsupported_hashes_naming_file_and_line() {
    let dir = temp_dir("access-check-hash");
    let users = dir.join("users");
    std::fs::write(
        &users,
        format!("ann:{}\nbob:$apr1$abc$def\n", bcrypt_hash("x")),
    )
    .unwrap();
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\n\n\
         [[module]]\nname = \"access\"\nhtpasswd = {:?}\n",
        users.display().to_string()
    );
    let path = write_config(&dir, "weir.toml", &text);
    let out = run_weir(
        &["check", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let expected = format!(
        "weir: {}:7: key `module[0].htpasswd`: {}:2: user `bob`: unsupported password hash",
        path.display(),
        users.display()
    );
    assert!(
        stderr.contains(&expected),
        "expected {expected:?} in:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
