//! `a2a-edge agent new`: a project for an agent component in Rust, Python or JavaScript that
//! builds as it is, with the agent WIT beside it and the lines that build and serve it.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

/// Agent components.
#[derive(Subcommand)]
pub enum AgentCmd {
    /// Write a new agent project that builds as it is.
    New(NewArgs),
}

/// `agent new`.
#[derive(Args)]
pub struct NewArgs {
    /// The agent's name: 1-64 of a-z, 0-9, - and _ (its component is `<name>.wasm`).
    pub name: String,
    /// The language.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// Where to write it (default: `./<name>`); it must not exist yet.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// A language agents are written in.
#[derive(Clone, Copy, ValueEnum)]
pub enum Lang {
    /// Rust with wit-bindgen, built by cargo for wasm32-wasip2.
    Rust,
    /// Python, built by componentize-py.
    Python,
    /// JavaScript, built by componentize-js.
    Js,
}

/// The agent WIT, as `wit/` of every project.
const WIT: &[(&str, &str)] = &[
    ("agent.wit", include_str!("../../../wit/agent/agent.wit")),
    (
        "deps/cli.wit",
        include_str!("../../../wit/agent/deps/cli.wit"),
    ),
    (
        "deps/clocks.wit",
        include_str!("../../../wit/agent/deps/clocks.wit"),
    ),
    (
        "deps/config.wit",
        include_str!("../../../wit/agent/deps/config.wit"),
    ),
    (
        "deps/filesystem.wit",
        include_str!("../../../wit/agent/deps/filesystem.wit"),
    ),
    (
        "deps/http.wit",
        include_str!("../../../wit/agent/deps/http.wit"),
    ),
    (
        "deps/io.wit",
        include_str!("../../../wit/agent/deps/io.wit"),
    ),
    (
        "deps/keyvalue.wit",
        include_str!("../../../wit/agent/deps/keyvalue.wit"),
    ),
    (
        "deps/logging.wit",
        include_str!("../../../wit/agent/deps/logging.wit"),
    ),
    (
        "deps/random.wit",
        include_str!("../../../wit/agent/deps/random.wit"),
    ),
    (
        "deps/sockets.wit",
        include_str!("../../../wit/agent/deps/sockets.wit"),
    ),
];

impl Lang {
    /// Its files (path, contents with `{{name}}` for the name).
    fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Lang::Rust => &[
                ("Cargo.toml", include_str!("templates/Cargo.toml")),
                ("src/lib.rs", include_str!("templates/lib.rs")),
            ],
            Lang::Python => &[
                ("app.py", include_str!("templates/app.py")),
                ("requirements.txt", "componentize-py==0.25.1\n"),
            ],
            Lang::Js => &[
                ("agent.js", include_str!("templates/agent.js")),
                ("package.json", include_str!("templates/package.json")),
                (
                    "package-lock.json",
                    include_str!("templates/package-lock.json"),
                ),
            ],
        }
    }

    /// The command that builds it, and the wasm it writes (relative to the project).
    fn build(self, name: &str) -> (String, String) {
        match self {
            Lang::Rust => (
                "cargo build --release --target wasm32-wasip2   # rustup target add wasm32-wasip2, once".into(),
                format!("target/wasm32-wasip2/release/{}.wasm", name.replace('-', "_")),
            ),
            Lang::Python => (
                format!("pip install -r requirements.txt && componentize-py -d wit -w agent componentize app -o {name}.wasm"),
                format!("{name}.wasm"),
            ),
            Lang::Js => ("npm ci && npm run build".into(), format!("{name}.wasm")),
        }
    }
}

/// What a project needs besides its sources: the config that serves it and a README.
fn config(name: &str) -> String {
    format!(
        "# Serves the agent as the instance `{name}` (a2a-edge's docs/agents.md): grant it more with\n\
         # grants = {{ keyValue = true, allowedHosts = [...], llm = {{ ... }}, agents = [...] }}.\n\
         [[presets]]\nid = \"{name}\"\nbackend = \"component\"\ncomponent = \"{name}\"\n\n\
         [[instances]]\nid = \"{name}\"\nname = \"{name}\"\ndescription = \"The {name} agent.\"\npreset = \"{name}\"\n"
    )
}

/// The line that serves the built agent.
fn serve_line(name: &str, wasm: &str) -> String {
    format!(
        "mkdir -p a2a-data/components && cp {wasm} a2a-data/components/{name}.wasm && a2a-edge serve --config a2a-edge.toml"
    )
}

/// Writes the project; what to run next.
pub fn new(args: &NewArgs) -> anyhow::Result<String> {
    crate::engine::registry::check_name(&args.name)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists() {
        bail!("{} exists: give a new folder with --dir", dir.display());
    }
    let (build, wasm) = args.lang.build(&args.name);
    let serve = serve_line(&args.name, &wasm);
    let readme = format!(
        "# {name}\n\nAn a2a-edge agent component (world `a2a:agent/agent@0.1.0`, in `wit/`).\n\n\
         Build:\n\n```sh\n{build}\n```\n\nServe (at http://127.0.0.1:3080/a2a/{name}):\n\n```sh\n{serve}\n```\n",
        name = args.name
    );
    let name = args.name.as_str();
    let mut files: Vec<(String, String)> = args
        .lang
        .files()
        .iter()
        .map(|(p, text)| ((*p).to_owned(), text.replace("{{name}}", name)))
        .collect();
    files.extend(
        WIT.iter()
            .map(|(p, text)| (format!("wit/{p}"), (*text).to_owned())),
    );
    files.push(("a2a-edge.toml".into(), config(name)));
    files.push(("README.md".into(), readme));
    for (path, text) in files {
        write(&dir.join(path), &text)?;
    }
    Ok(format!(
        "wrote {}\nbuild:  (cd {}; {build})\nserve:  (cd {}; {serve})",
        dir.display(),
        dir.display(),
        dir.display()
    ))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
