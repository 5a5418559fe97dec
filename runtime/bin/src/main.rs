//! The `a2a-edge` command, whose arguments and subcommands are the library's `command` module.

fn main() -> std::process::ExitCode {
    a2a_edge::command::main()
}
