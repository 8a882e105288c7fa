//! Control groups for the verdict's made limits: a CPU quota (`cpu.max` under cgroup v2,
//! `cpu.cfs_quota_us` and `cpu.cfs_period_us` under v1) and a disk's read and write rate
//! (`io.max` under v2, `blkio.throttle.*_bps_device` under v1). A process joins a group by
//! writing its pid to the group's `cgroup.procs` ([`Group::procs`]); a group is removed when
//! dropped.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where this machine's control groups are, by version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1: one directory per controller.
    V1 {
        /// The `cpu` controller's mount (`/sys/fs/cgroup/cpu`).
        cpu: Option<PathBuf>,
        /// The `blkio` controller's mount (`/sys/fs/cgroup/blkio`).
        blkio: Option<PathBuf>,
    },
    /// cgroup v2: one tree, its controllers enabled per subtree.
    V2 {
        /// The tree's root (`/sys/fs/cgroup`).
        root: PathBuf,
    },
}

/// A group made for one case, removed when dropped.
#[derive(Debug)]
pub struct Group {
    dir: PathBuf,
}

impl Group {
    /// The file a process writes its pid to to join the group.
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Writes `value` to the control file `file`, naming both on failure.
fn write(file: &Path, value: &str) -> Result<()> {
    std::fs::write(file, value)
        .with_context(|| format!("cannot write '{value}' to '{}'", file.display()))
}

impl Hierarchy {
    /// This machine's: v1 where the `cpu` or `blkio` controller is mounted on its own
    /// (`/sys/fs/cgroup/cpu`), else v2 where `/sys/fs/cgroup` is a cgroup2 tree; `None` for
    /// neither.
    pub fn detect() -> Option<Hierarchy> {
        Hierarchy::under(Path::new("/sys/fs/cgroup"))
    }

    /// The hierarchy mounted under `base`.
    pub fn under(base: &Path) -> Option<Hierarchy> {
        let dir = |name: &str| Some(base.join(name)).filter(|p| p.join("tasks").exists());
        let (cpu, blkio) = (dir("cpu"), dir("blkio"));
        if cpu.is_some() || blkio.is_some() {
            return Some(Hierarchy::V1 { cpu, blkio });
        }
        base.join("cgroup.controllers")
            .exists()
            .then(|| Hierarchy::V2 {
                root: base.to_owned(),
            })
    }

    /// Whether CPU quotas can be made here.
    pub fn has_cpu(&self) -> bool {
        match self {
            Hierarchy::V1 { cpu, .. } => cpu.is_some(),
            Hierarchy::V2 { root } => controller(root, "cpu"),
        }
    }

    /// Whether disk rates can be limited here.
    pub fn has_io(&self) -> bool {
        match self {
            Hierarchy::V1 { blkio, .. } => blkio.is_some(),
            Hierarchy::V2 { root } => controller(root, "io"),
        }
    }

    /// A group `name` allowed `quota_us` of CPU time per `period_us`.
    pub fn cpu_quota(&self, name: &str, quota_us: u64, period_us: u64) -> Result<Group> {
        let group = self.group("cpu", name)?;
        match self {
            Hierarchy::V1 { .. } => {
                write(&group.dir.join("cpu.cfs_period_us"), &period_us.to_string())?;
                write(&group.dir.join("cpu.cfs_quota_us"), &quota_us.to_string())?;
            }
            Hierarchy::V2 { .. } => {
                write(
                    &group.dir.join("cpu.max"),
                    &format!("{quota_us} {period_us}"),
                )?;
            }
        }
        Ok(group)
    }

    /// A group `name` whose reads and writes of block device `dev` (`MAJOR:MINOR`) go at
    /// most `bytes_per_s`.
    pub fn io_rate(&self, name: &str, dev: &str, bytes_per_s: u64) -> Result<Group> {
        let group = self.group("io", name)?;
        match self {
            Hierarchy::V1 { .. } => {
                for way in ["read", "write"] {
                    let file = group.dir.join(format!("blkio.throttle.{way}_bps_device"));
                    write(&file, &format!("{dev} {bytes_per_s}"))?;
                }
            }
            Hierarchy::V2 { .. } => {
                let limit = format!("{dev} rbps={bytes_per_s} wbps={bytes_per_s}");
                write(&group.dir.join("io.max"), &limit)?;
            }
        }
        Ok(group)
    }

    /// Makes the directory of group `name` for `controller` (`cpu` or `io`); under v2, with
    /// the controller enabled for the root's children first.
    fn group(&self, controller: &str, name: &str) -> Result<Group> {
        let parent = match (self, controller) {
            (Hierarchy::V1 { cpu: Some(p), .. }, "cpu") => p.clone(),
            (Hierarchy::V1 { blkio: Some(p), .. }, "io") => p.clone(),
            (Hierarchy::V1 { .. }, _) => bail!("no cgroup v1 {controller} controller mounted"),
            (Hierarchy::V2 { root }, _) => {
                write(
                    &root.join("cgroup.subtree_control"),
                    &format!("+{controller}"),
                )?;
                root.clone()
            }
        };
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot make cgroup '{}'", dir.display()))?;
        Ok(Group { dir })
    }
}

/// True if the v2 tree at `root` offers `name` to its children.
fn controller(root: &Path, name: &str) -> bool {
    std::fs::read_to_string(root.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    /// The quota writer writes what each version's kernel reads: v1 the period and quota
    /// files, v2 one `cpu.max` line (with the controller enabled for the children); a disk
    /// rate as v1's two throttle files or v2's `io.max`. Checked on a stand-in tree.
    #[test]
    fn quotas_are_written_as_each_version_reads_them() {
        let v1 = tempfile::tempdir().unwrap();
        for c in ["cpu", "blkio"] {
            std::fs::create_dir(v1.path().join(c)).unwrap();
            std::fs::write(v1.path().join(c).join("tasks"), "").unwrap();
        }
        let h = Hierarchy::under(v1.path()).unwrap();
        assert!(matches!(h, Hierarchy::V1 { .. }) && h.has_cpu() && h.has_io());
        let g = h.cpu_quota("t-cpu", 1000, 10_000).unwrap();
        assert_eq!(read(&v1.path().join("cpu/t-cpu/cpu.cfs_quota_us")), "1000");
        assert_eq!(
            read(&v1.path().join("cpu/t-cpu/cpu.cfs_period_us")),
            "10000"
        );
        assert_eq!(g.procs(), v1.path().join("cpu/t-cpu/cgroup.procs"));
        let d = h.io_rate("t-io", "7:3", 4 << 20).unwrap();
        let throttle = v1.path().join("blkio/t-io/blkio.throttle.read_bps_device");
        assert_eq!(read(&throttle), "7:3 4194304");
        drop(d);

        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(v2.path().join("cgroup.controllers"), "cpuset cpu io memory").unwrap();
        let h = Hierarchy::under(v2.path()).unwrap();
        assert_eq!(
            h,
            Hierarchy::V2 {
                root: v2.path().to_owned()
            }
        );
        assert!(h.has_cpu() && h.has_io());
        let _g = h.cpu_quota("t-cpu", 1000, 10_000).unwrap();
        assert_eq!(read(&v2.path().join("t-cpu/cpu.max")), "1000 10000");
        assert_eq!(read(&v2.path().join("cgroup.subtree_control")), "+cpu");
        let _d = h.io_rate("t-io", "7:3", 4 << 20).unwrap();
        assert_eq!(
            read(&v2.path().join("t-io/io.max")),
            "7:3 rbps=4194304 wbps=4194304"
        );
        let none = tempfile::tempdir().unwrap();
        assert_eq!(Hierarchy::under(none.path()), None);
    }
}
