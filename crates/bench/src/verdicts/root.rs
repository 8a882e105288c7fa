//! What the verdict's cases need root for, set up and taken down (each when dropped): the two
//! namespaces of a link case (`scripts/lan.sh`), a slow disk's loop device, the page cache
//! dropped. Control groups are [`super::cgroup`]'s.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The two namespaces, brought up at the rate the case asks (by `scripts/lan.sh`).
pub(super) struct Lan {
    script: PathBuf,
    name: String,
    rate: Option<Option<&'static str>>,
}

impl Lan {
    pub(super) fn new(top: &Path, name: &str) -> Lan {
        Lan {
            script: top.join("scripts/lan.sh"),
            name: name.to_owned(),
            rate: None,
        }
    }

    pub(super) fn up(&mut self, rate: Option<&'static str>) -> Result<()> {
        if self.rate == Some(rate) {
            return Ok(());
        }
        let out = Command::new(&self.script)
            .args(["up", "--name", &self.name, "--rate", rate.unwrap_or("none")])
            .output()
            .with_context(|| format!("cannot run '{}'", self.script.display()))?;
        if !out.status.success() {
            bail!("lan.sh up failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        self.rate = Some(rate);
        Ok(())
    }

    pub(super) fn down(&mut self) {
        if self.rate.take().is_some() {
            let _ = Command::new(&self.script)
                .args(["down", "--name", &self.name])
                .output();
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        self.down();
    }
}

/// Drops the page cache, so a file is read from its disk.
pub(super) fn drop_caches() {
    // SAFETY: sync(2) takes nothing and cannot fail.
    unsafe { libc::sync() };
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
}

/// A slow disk's loop device, mounted, holding the big file as `source.txt` and a `save`
/// directory; unmounted and detached when dropped.
pub(super) struct Disk {
    image: PathBuf,
    dev: String,
    /// Its `MAJOR:MINOR`, for a control group's I/O limit.
    pub(super) devno: String,
    /// Where it is mounted.
    pub(super) mnt: PathBuf,
}

impl Disk {
    pub(super) fn make(work: &Path, big: &Path) -> Result<Disk> {
        let image = work.join("disk.img");
        std::fs::File::create(&image)?.set_len(128 << 20)?;
        let dev = command("losetup", &["-f", "--show", &image.display().to_string()])?;
        let mut disk = Disk {
            image,
            dev: dev.trim().to_owned(),
            devno: String::new(),
            mnt: work.join("mnt"),
        };
        command("mkfs.ext4", &["-q", &disk.dev])?;
        std::fs::create_dir_all(&disk.mnt)?;
        command("mount", &[&disk.dev, &disk.mnt.display().to_string()])?;
        std::fs::copy(big, disk.mnt.join("source.txt"))?;
        std::fs::create_dir_all(disk.mnt.join("save"))?;
        let name = disk.dev.trim_start_matches("/dev/");
        disk.devno = std::fs::read_to_string(format!("/sys/block/{name}/dev"))?
            .trim()
            .to_owned();
        Ok(disk)
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = command("umount", &[&self.mnt.display().to_string()]);
        let _ = command("losetup", &["-d", &self.dev]);
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Runs `program args`, its stdout; an error with its stderr if it fails.
fn command(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
