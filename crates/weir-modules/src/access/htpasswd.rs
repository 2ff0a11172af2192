//! Apache-style htpasswd files (`user:hash` per line), with bcrypt (`$2y$`, `$2b$`,
//! `$2a$`) and SHA-crypt (`$5$`, `$6$`) hashes. Other kinds (MD5 `$apr1$`, SHA-1
//! `{SHA}`, crypt(3) DES, plain text) are refused: they are too weak to keep.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use sha_crypt::PasswordVerifier;

/// The users of one htpasswd file.
#[derive(Debug, Default)]
pub(crate) struct Htpasswd {
    users: HashMap<Box<str>, (Arc<str>, Hash)>,
}

#[derive(Debug)]
enum Hash {
    Bcrypt(Box<str>),
    ShaCrypt(Box<str>),
}

/// What identifies a version of the file, to notice that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    pub fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode: meta.ino(),
        })
    }
}

impl Htpasswd {
    /// Reads and checks the file. Errors name the file and the line.
    pub fn load(path: &Path) -> Result<Htpasswd, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Htpasswd::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Htpasswd, String> {
        let mut users = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let at = || format!("{}:{}", path.display(), n + 1);
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((user, hash)) = line.split_once(':') else {
                return Err(format!("{}: expected `user:hash`", at()));
            };
            if user.is_empty() {
                return Err(format!("{}: the user name is empty", at()));
            }
            let hash = if ["$2y$", "$2b$", "$2a$"].iter().any(|p| hash.starts_with(p)) {
                Hash::Bcrypt(hash.into())
            } else if hash.starts_with("$5$") || hash.starts_with("$6$") {
                Hash::ShaCrypt(hash.into())
            } else {
                return Err(format!(
                    "{}: user `{user}`: unsupported password hash (use bcrypt, `htpasswd -B`, or SHA-crypt, `openssl passwd -5` or `-6`)",
                    at()
                ));
            };
            if users.insert(user.into(), (Arc::from(user), hash)).is_some() {
                return Err(format!("{}: user `{user}` is listed twice", at()));
            }
        }
        Ok(Htpasswd { users })
    }

    /// The user, when `password` is theirs. Slow by design (bcrypt, SHA-crypt rounds):
    /// call it off the proxy's threads.
    pub fn verify(&self, user: &str, password: &[u8]) -> Option<Arc<str>> {
        let (name, hash) = self.users.get(user)?;
        let good = match hash {
            Hash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            Hash::ShaCrypt(h) => sha_crypt::ShaCrypt::default()
                .verify_password(password, &**h)
                .is_ok(),
        };
        good.then(|| name.clone())
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }
}
