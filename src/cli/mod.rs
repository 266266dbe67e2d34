//! The command line: `serve`, `check-config`, `mock-upstream`, `memories`, `agents`, `blocks`,
//! `mcp`, `reindex`, `jobs`, `migrate`, `bench`, `eval`.
//!
//! Parsing and dispatch only; each command's work lives in its own module.

pub mod agents;
pub mod blocks;
pub mod check;
pub mod memories;
pub mod migrate;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, LogFormat, Overrides};
use crate::hooks::LogExchanges;

#[derive(Parser)]
#[command(
    name = "memproxy",
    version,
    about = "OpenAI-compatible proxy that gives any chat app long-term memory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    Serve(ServeArgs),
    /// Load and validate the configuration, then print it (secrets redacted).
    CheckConfig(ConfigArgs),
    /// Run the scripted OpenAI-compatible upstream used by the tests, for trying memproxy
    /// without an LLM (answers "echo: <your message>").
    MockUpstream {
        #[arg(long, default_value = "127.0.0.1:8090")]
        listen: std::net::SocketAddr,
    },
    /// Browse and edit memory: list, search, add, delete, export, import, forget.
    Memories {
        #[command(flatten)]
        config: ConfigArgs,
        #[command(subcommand)]
        command: crate::cli::memories::MemoriesCommand,
    },
    /// Explicit-mode agents: list, show, edit blocks, archival memory, queue, summary, steps, reset.
    Agents {
        #[command(flatten)]
        config: ConfigArgs,
        #[command(subcommand)]
        command: crate::cli::agents::AgentsCommand,
    },
    /// Serve one user's memory over MCP on stdin/stdout (for clients that launch a process).
    Mcp {
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        who: crate::cli::memories::Who,
    },
    /// Shared core-memory blocks of a user's agents: list, set, delete, attach, detach.
    Blocks {
        #[command(flatten)]
        config: ConfigArgs,
        #[command(subcommand)]
        command: crate::cli::blocks::BlocksCommand,
    },
    /// Re-embed everything without a vector of the configured model (after changing it).
    Reindex(ConfigArgs),
    /// Check the store for what a crash or a bug could leave behind (orphan rows, stale vector
    /// indexes, abandoned jobs, …); exit status 1 while an error is left.
    Check {
        #[command(flatten)]
        config: ConfigArgs,
        /// Put right what can be without losing anything.
        #[arg(long)]
        repair: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The post-processing job queue.
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// Copy every user's memory from a SQLite data directory into PostgreSQL (vectors
    /// included), and check the copy.
    Migrate {
        /// The data directory holding memproxy.db (stop memproxy first).
        #[arg(long)]
        from: PathBuf,
        /// postgres://user:password@host:port/database
        #[arg(long, env = "MEMPROXY_DATABASE_URL", hide_env_values = true)]
        to: String,
        #[arg(long, default_value_t = 4)]
        pool_size: usize,
    },
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
    /// Compare strategies on a dataset (`eval --dataset FILE …`), or `eval retrieval|strategies`.
    Eval(Box<crate::eval::EvalArgs>),
}

#[derive(Subcommand)]
enum JobsCommand {
    /// List jobs (JSON, one per line), optionally of one state: queued, running, done, failed, merged.
    List {
        #[command(flatten)]
        config: ConfigArgs,
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

#[derive(Args)]
pub struct ConfigArgs {
    /// TOML config file (default: $MEMPROXY_CONFIG, else built-in defaults).
    #[arg(long, env = "MEMPROXY_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Address to listen on, e.g. 127.0.0.1:8080.
    #[arg(long)]
    listen: Option<String>,
    /// Default memory strategy: passthrough, window, summary, implicit, explicit.
    #[arg(long)]
    mode: Option<String>,
    /// Upstream base URL ending in /v1.
    #[arg(long)]
    upstream: Option<String>,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("memproxy: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(args: &ConfigArgs, overrides: &Overrides) -> anyhow::Result<Config> {
    let env = |name: &str| std::env::var(name).ok();
    Ok(Config::load(args.config.as_deref(), &env, overrides)?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => {
            let overrides = Overrides {
                listen: args.listen,
                mode: args.mode,
                upstream: args.upstream,
            };
            let config = load(&args.config, &overrides)?;
            init_logging(&config);
            runtime()?.block_on(async {
                let server = crate::server::start(config, Arc::new(LogExchanges)).await?;
                crate::server::shutdown_signal().await;
                tracing::info!("shutting down");
                server.shutdown().await;
                Ok(())
            })
        }
        Command::CheckConfig(args) => {
            let config = load(&args, &Overrides::default())?;
            print!("{}", toml::to_string(&config)?);
            eprintln!("config OK");
            Ok(())
        }
        Command::MockUpstream { listen } => {
            init_logging(&Config::default());
            runtime()?.block_on(async {
                let mock = crate::mock::MockUpstream::start_on(listen).await?;
                println!("mock upstream on {}", mock.base_url());
                crate::server::shutdown_signal().await;
                Ok(())
            })
        }
        Command::Memories { config, command } => {
            let config = load(&config, &Overrides::default())?;
            runtime()?.block_on(crate::cli::memories::memories(&config, command))
        }
        Command::Agents { config, command } => {
            let config = load(&config, &Overrides::default())?;
            runtime()?.block_on(crate::cli::agents::agents(&config, command))
        }
        Command::Mcp { config, who } => {
            let config = load(&config, &Overrides::default())?;
            init_logging_to_stderr(&config);
            let scope = crate::store::UserScope::new(&who.tenant, &who.user);
            runtime()?.block_on(crate::mcp::serve_stdio(&config, scope))
        }
        Command::Blocks { config, command } => {
            let config = load(&config, &Overrides::default())?;
            runtime()?.block_on(crate::cli::blocks::blocks(&config, command))
        }
        Command::Jobs {
            command:
                JobsCommand::List {
                    config,
                    state,
                    limit,
                },
        } => {
            let config = load(&config, &Overrides::default())?;
            runtime()?.block_on(crate::cli::memories::jobs(&config, state, limit))
        }
        Command::Reindex(args) => {
            let config = load(&args, &Overrides::default())?;
            runtime()?.block_on(crate::cli::memories::reindex(&config))
        }
        Command::Check {
            config,
            repair,
            json,
        } => {
            let config = load(&config, &Overrides::default())?;
            runtime()?.block_on(crate::cli::check::run(&config, repair, json))
        }
        Command::Migrate {
            from,
            to,
            pool_size,
        } => crate::cli::migrate::run(&from, &to, pool_size),
        Command::Bench(command) => runtime()?.block_on(crate::bench::run(command)),
        Command::Eval(command) => {
            // Warnings (failed memory jobs, upstream errors) matter while a long run goes by;
            // RUST_LOG asks for more.
            let mut quiet = Config::default();
            quiet.log.level = "warn".to_owned();
            init_logging(&quiet);
            runtime()?.block_on(crate::eval::run(*command))
        }
    }
}

/// Logging for `memproxy mcp`, whose stdout is the protocol.
fn init_logging_to_stderr(config: &Config) {
    install_logging(config, std::io::stderr);
}

fn init_logging(config: &Config) {
    install_logging(config, std::io::stdout);
}

fn install_logging<W>(config: &Config, writer: W)
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&config.log.level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let installed = match config.log.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    if let Err(error) = installed {
        eprintln!("memproxy: logging not initialised: {error}");
    }
}
