//! The agents written in Python and JavaScript (`components/agents/notes-py`, `notes-js`), built
//! with their pinned toolchains. The toolchains install once under `target/agent-toolchains/`
//! (again only when their pin changes) and each build is kept under `target/agent-builds/` by
//! the hash of its sources and the WIT, so a second test run builds nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// One build at a time within a test process (the toolchains share their folder).
static BUILDING: Mutex<()> = Mutex::new(());

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e} (is it installed?)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Hex sha256 of the files under each of `paths` (in name order).
fn hash(paths: &[PathBuf]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut files = Vec::new();
    for p in paths {
        collect(p, &mut files);
    }
    files.sort();
    for f in files {
        h.update(f.to_string_lossy().as_bytes());
        h.update(std::fs::read(&f).unwrap());
    }
    hex::encode(&h.finalize()[..12])
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            if e.file_name() != "node_modules" {
                collect(&e.path(), out);
            }
        }
    } else {
        out.push(path.to_owned());
    }
}

/// `dir` set up by `install` unless its stamp already says `pin`.
fn toolchain(dir: &Path, pin: &str, install: impl FnOnce(&Path)) {
    let stamp = dir.join("installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == pin) {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    install(dir);
    std::fs::write(stamp, pin).unwrap();
}

/// Copies the files under `from` to `to`, following links.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (path, dest) = (e.path(), to.join(e.file_name()));
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The wasm of example `name` built by `build` in a scratch folder holding its sources and the
/// agent WIT as `wit/` (componentize-js reads only below its working folder), from the build
/// cache when its sources and the WIT are unchanged.
fn built(name: &str, build: impl FnOnce(&Path)) -> PathBuf {
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let source = root().join("components/agents").join(name);
    let wit = root().join("wit/agent");
    let out = root().join("target/agent-builds").join(format!(
        "{name}-{}.wasm",
        hash(&[source.clone(), wit.clone()])
    ));
    if !out.exists() {
        let scratch = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(&source).unwrap().flatten() {
            if f.path().is_file() {
                std::fs::copy(f.path(), scratch.path().join(f.file_name())).unwrap();
            }
        }
        copy_tree(&wit, &scratch.path().join("wit"));
        build(scratch.path());
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::rename(scratch.path().join(format!("{name}.wasm")), &out).unwrap();
    }
    out
}

/// A virtualenv at `dir` with `requirements` installed (again only when they change), made
/// with the machine's `python3`; its folder.
pub fn venv(dir: &Path, requirements: &Path) -> PathBuf {
    let pin = std::fs::read_to_string(requirements).unwrap();
    toolchain(dir, &pin, |dir| {
        run(Command::new("python3").args(["-m", "venv"]).arg(dir));
        run(Command::new(dir.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check", "-r"])
            .arg(requirements));
    });
    dir.to_owned()
}

/// Runs componentize-py (the version `requirements` pins, installed once) in `project` (its
/// `app.py` and `wit/`), writing `<name>.wasm` there.
pub fn componentize_py(requirements: &Path, project: &Path, name: &str) {
    let tools = venv(&root().join("target/agent-toolchains/py"), requirements);
    let out = format!("{name}.wasm");
    run(Command::new(tools.join("bin/componentize-py"))
        .args([
            "-d",
            "wit",
            "-w",
            "agent",
            "componentize",
            "app",
            "-o",
            &out,
        ])
        .current_dir(project));
}

/// Runs componentize-py (as the `lock` of `package.json` pins it, installed once) in `project`
/// (its `agent.js` and `wit/`), writing `<name>.wasm` there.
pub fn componentize_js(package: &Path, project: &Path, name: &str) {
    let tools = root().join("target/agent-toolchains/js");
    let lock = package.with_file_name("package-lock.json");
    let pin = std::fs::read_to_string(&lock).unwrap();
    toolchain(&tools, &pin, |tools| {
        std::fs::copy(package, tools.join("package.json")).unwrap();
        std::fs::copy(&lock, tools.join("package-lock.json")).unwrap();
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(tools));
    });
    let out = format!("{name}.wasm");
    run(
        Command::new(tools.join("node_modules/.bin/componentize-js"))
            .args([
                "--wit",
                "wit",
                "--world-name",
                "agent",
                "-o",
                &out,
                "agent.js",
            ])
            .current_dir(project),
    );
}

/// The pins of the examples, which generated projects share.
fn example(name: &str, file: &str) -> PathBuf {
    root().join("components/agents").join(name).join(file)
}

/// `components/agents/notes-py`, built with componentize-py (pinned in its requirements.txt).
pub fn python_agent() -> PathBuf {
    built("notes-py", |dir| {
        componentize_py(&example("notes-py", "requirements.txt"), dir, "notes-py")
    })
}

/// `components/agents/notes-js`, built with componentize-js (pinned in its package-lock.json).
pub fn js_agent() -> PathBuf {
    built("notes-js", |dir| {
        componentize_js(&example("notes-js", "package.json"), dir, "notes-js")
    })
}

/// The pinned requirements and package manifest of the examples (for projects that share them).
pub fn pins() -> (PathBuf, PathBuf) {
    (
        example("notes-py", "requirements.txt"),
        example("notes-js", "package.json"),
    )
}
