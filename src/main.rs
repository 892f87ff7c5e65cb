//! `condense`: the node (`serve`) and its administrative commands; the media commands are
//! handed to `condense-media`, the one program that links FFmpeg.

use std::process::ExitCode;

use clap::Parser;
use condense::config::{Cli, Command};
use condense::{actors, cli, serve, telemetry};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let common = cli.common;
    if !matches!(cli.command, Command::Openapi | Command::License { .. }) {
        serve::private_umask();
    }
    let result = match cli.command {
        // This binary does not link FFmpeg: its media work is `condense-media`'s.
        Command::Transcode
        | Command::Helper
        | Command::Media
        | Command::Probe { .. }
        | Command::Vmaf { .. }
        | Command::CrfSearch { .. }
        | Command::Version => return cli::hand_to_media_binary(),
        Command::Openapi => return cli::openapi(),
        Command::Serve(args) => {
            serve::fix_allocator_thresholds();
            actors::teardown::block_on_system(serve::run(common, *args))
        }
        Command::Migrate => {
            let _log = telemetry::init(&common.log_level, None);
            actors::teardown::block_on_system(cli::migrate(&common))
        }
        Command::User { command } => {
            let _log = telemetry::init("warn", None);
            actors::teardown::block_on_system(cli::user(&common, command))
        }
        Command::License { command } => cli::license(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("condense: {err}");
            ExitCode::FAILURE
        }
    }
}
