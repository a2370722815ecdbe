//! Safe resolution of request targets inside the document root.
//!
//! Two layers. `decode_target` turns the request target into a relative path: it accepts the
//! origin form (`/a/b`) and the absolute form (`http://host/a/b`), cuts the query, decodes
//! percent escapes once, refuses NUL bytes (400) and any `..` segment (403), and drops empty
//! and `.` segments, so `//etc/passwd` means `etc/passwd` under the root; a trailing `/` is
//! kept, so that `/a.txt/` names a directory and finds none (404), as `open(2)` has it.
//! `Root::open` then opens
//! that path with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to the root's
//! directory descriptor: the kernel refuses any resolution that leaves the root, whether by a
//! symlink (absolute or relative), a `..` smuggled through a symlink, or a magic link, and there
//! is no window between checking and opening. Kernels without openat2 (before 5.6) fall back to
//! canonicalising and checking the prefix.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use percent_encoding::percent_decode;

/// Why a target is not served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// Not a path at all (400).
    BadRequest,
    /// Tries to leave the root, or is not a regular file (403).
    Forbidden,
    /// Nothing there (404).
    NotFound,
}

impl Denied {
    pub fn status(self) -> u16 {
        match self {
            Denied::BadRequest => 400,
            Denied::Forbidden => 403,
            Denied::NotFound => 404,
        }
    }
}

/// The relative path a request target names, or why it names none.
pub fn decode_target(target: &str) -> Result<Vec<u8>, Denied> {
    let mut t = target;
    for scheme in ["http://", "https://"] {
        // Compared as bytes: the target may hold multi-byte UTF-8 where a str slice would
        // panic (found by the fuzzer).
        let head = t.as_bytes().get(..scheme.len());
        if head.is_some_and(|h| h.eq_ignore_ascii_case(scheme.as_bytes())) {
            let rest = &t[scheme.len()..];
            t = rest.find('/').map_or("/", |i| &rest[i..]);
        }
    }
    if !t.starts_with('/') {
        return Err(Denied::BadRequest);
    }
    let end = t.find(['?', '#']).unwrap_or(t.len());
    let decoded: Vec<u8> = percent_decode(&t.as_bytes()[..end]).collect();
    if decoded.contains(&0) {
        return Err(Denied::BadRequest);
    }
    let mut out = Vec::with_capacity(decoded.len());
    for seg in decoded.split(|b| *b == b'/') {
        match seg {
            b"" | b"." => continue,
            b".." => return Err(Denied::Forbidden),
            _ => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(seg);
            }
        }
    }
    if !out.is_empty() && decoded.ends_with(b"/") {
        out.push(b'/');
    }
    Ok(out)
}

/// The document root, held open as a directory descriptor.
pub struct Root {
    dir: OwnedFd,
    path: PathBuf,
    openat2: AtomicBool,
}

const INDEX: &[u8] = b"index.html";

impl Root {
    pub fn new(path: &Path) -> io::Result<Root> {
        let path = path.canonicalize()?;
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in root"))?;
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Root {
            // SAFETY: open returned a fresh descriptor that nothing else owns.
            dir: unsafe { OwnedFd::from_raw_fd(fd) },
            path,
            openat2: AtomicBool::new(true),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens a regular file at `rel` (from `decode_target`) beneath the root, with its size
    /// and whether it is a directory's `index.html` (which a directory serves).
    pub fn open(&self, rel: &[u8]) -> Result<(File, u64, bool), Denied> {
        let rel = if rel.is_empty() { INDEX } else { rel };
        let file = self.open_beneath(rel)?;
        let meta = file.metadata().map_err(|_| Denied::NotFound)?;
        if meta.is_file() {
            return Ok((file, meta.len(), rel == INDEX));
        }
        if meta.is_dir() && rel != INDEX {
            let mut index = rel.strip_suffix(b"/").unwrap_or(rel).to_vec();
            index.extend_from_slice(b"/index.html");
            let file = self.open_beneath(&index).map_err(|_| Denied::Forbidden)?;
            let meta = file.metadata().map_err(|_| Denied::NotFound)?;
            if meta.is_file() {
                return Ok((file, meta.len(), true));
            }
        }
        Err(Denied::Forbidden)
    }

    fn open_beneath(&self, rel: &[u8]) -> Result<File, Denied> {
        if self.openat2.load(Ordering::Relaxed) {
            match self.openat2(rel) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    self.openat2.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(classify(&e)),
                Ok(f) => return Ok(f),
            }
        }
        self.open_checked(rel)
    }

    fn openat2(&self, rel: &[u8]) -> io::Result<File> {
        let c = CString::new(rel).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: open_how is a plain C struct; all-zero is valid and we set the fields we use.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        // O_NONBLOCK: opening a FIFO planted in the root must not block the master thread.
        how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64;
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: the directory fd is open for the life of `self`, `c` and `how` are valid for
        // the call and `size` is the size of the struct passed, as openat2(2) requires.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        Ok(unsafe { File::from_raw_fd(fd as i32) })
    }

    /// Fallback without openat2: canonicalise, check the prefix, open.
    fn open_checked(&self, rel: &[u8]) -> Result<File, Denied> {
        let full = self.path.join(OsStr::from_bytes(rel));
        let real = full.canonicalize().map_err(|e| classify(&e))?;
        if !real.starts_with(&self.path) {
            return Err(Denied::Forbidden);
        }
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(real)
            .map_err(|e| classify(&e))
    }
}

fn classify(e: &io::Error) -> Denied {
    match e.raw_os_error() {
        // EXDEV: resolution would leave the root; ELOOP: a magic link or a symlink loop.
        Some(libc::EXDEV | libc::ELOOP | libc::EACCES | libc::EPERM) => Denied::Forbidden,
        _ => Denied::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_refuses_escapes() {
        assert_eq!(decode_target("/a/b.txt").unwrap(), b"a/b.txt");
        assert_eq!(decode_target("/a%20b?x=1#f").unwrap(), b"a b");
        assert_eq!(decode_target("//etc/passwd").unwrap(), b"etc/passwd");
        assert_eq!(decode_target("/./a/./b").unwrap(), b"a/b");
        assert_eq!(decode_target("/").unwrap(), b"");
        assert_eq!(decode_target("/sub/").unwrap(), b"sub/");
        assert_eq!(decode_target("/a.txt/?x").unwrap(), b"a.txt/");
        assert_eq!(decode_target("/a//").unwrap(), b"a/");
        assert_eq!(decode_target("http://h:1/x/y").unwrap(), b"x/y");
        assert_eq!(decode_target("HTTP://h").unwrap(), b"");
        assert_eq!(decode_target("/../etc/passwd"), Err(Denied::Forbidden));
        assert_eq!(decode_target("/a/%2e%2e/%2E%2E/x"), Err(Denied::Forbidden));
        assert_eq!(decode_target("/a%2f..%2fb"), Err(Denied::Forbidden));
        assert_eq!(decode_target("/a/.."), Err(Denied::Forbidden));
        assert_eq!(decode_target("/a%00b"), Err(Denied::BadRequest));
        assert_eq!(decode_target("etc/passwd"), Err(Denied::BadRequest));
        assert_eq!(decode_target("*"), Err(Denied::BadRequest));
        // Decoded once: %252e%252e is the literal name "%2e%2e", a harmless missing file.
        assert_eq!(decode_target("/%252e%252e").unwrap(), b"%2e%2e");
        // Multi-byte UTF-8 where the scheme would be (a panic once, found by the fuzzer).
        assert_eq!(
            decode_target("/%2ee2e\u{690}12e"),
            Ok(".e2e\u{690}12e".as_bytes().to_vec())
        );
        assert_eq!(decode_target("ht\u{690}p://x"), Err(Denied::BadRequest));
    }

    #[test]
    fn opens_inside_and_refuses_symlinks_out() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("a.txt"), b"hello").unwrap();
        std::fs::write(root.join("sub/index.html"), b"<p>").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../", root.join("up")).unwrap();
        std::os::unix::fs::symlink("a.txt", root.join("inside")).unwrap();
        let r = Root::new(&root).unwrap();
        assert_eq!(r.open(b"a.txt").unwrap().1, 5);
        assert_eq!(r.open(b"inside").unwrap().1, 5);
        assert_eq!(r.open(b"sub").unwrap().1, 3);
        assert_eq!(r.open(b"sub/").unwrap().1, 3);
        // A file named as a directory is not there (ENOTDIR), as nginx answers it.
        assert_eq!(r.open(b"a.txt/").unwrap_err(), Denied::NotFound);
        assert_eq!(r.open(b"missing").unwrap_err(), Denied::NotFound);
        assert_eq!(r.open(b"abs").unwrap_err(), Denied::Forbidden);
        // root/up points two levels up, to the shared temp directory holding `outside`.
        let name = outside.path().file_name().unwrap().to_str().unwrap();
        let up = format!("up/{name}/secret");
        assert_eq!(r.open(up.as_bytes()).unwrap_err(), Denied::Forbidden);
        // The fallback path refuses the same escapes.
        r.openat2.store(false, Ordering::Relaxed);
        assert_eq!(r.open(b"a.txt").unwrap().1, 5);
        assert_eq!(r.open(b"sub/").unwrap().1, 3);
        assert_eq!(r.open(b"a.txt/").unwrap_err(), Denied::NotFound);
        assert_eq!(r.open(b"abs").unwrap_err(), Denied::Forbidden);
        assert_eq!(r.open(up.as_bytes()).unwrap_err(), Denied::Forbidden);
    }
}
