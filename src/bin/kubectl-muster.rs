//! `kubectl muster`: why a gang waits, from the user's kubeconfig, without a port-forward.
//! Installed on PATH as `kubectl-muster`, kubectl runs it as a plugin.
//!
//! - `kubectl muster gangs` — every gang: spec source, phase, members per task, seats, reason;
//! - `kubectl muster why POD` — the decision and numbers for that pod's gang, and what
//!   kube-scheduler and the Events say of the pod;
//! - `kubectl muster describe GANG` — one gang in full.
//!
//! muster's `/gangs` is read through the API server's service proxy to muster's ops listener
//! (`--ops-gangs`); when muster is unreachable, the PodGroups' status and the pods' Events are
//! shown instead, and the output says so.
#![forbid(unsafe_code)]

#[path = "kubectl-muster/render.rs"]
mod render;
#[path = "kubectl-muster/source.rs"]
mod source;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use kube::config::{KubeConfigOptions, Kubeconfig};

use render::Gang;
use source::Muster;

#[derive(Parser)]
#[command(
    name = "kubectl muster",
    about = "Why a gang waits: muster's gang view, through the API server"
)]
struct Args {
    /// Kubeconfig to use (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    context: Option<String>,
    /// Namespace of the pod or gang (default: the context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// `gangs`: every namespace.
    #[arg(short = 'A', long, global = true)]
    all_namespaces: bool,
    /// Where muster runs.
    #[arg(
        long,
        global = true,
        default_value = "muster-system",
        env = "MUSTER_NAMESPACE"
    )]
    muster_namespace: String,
    /// muster's Service.
    #[arg(long, global = true, default_value = "muster")]
    muster_service: String,
    /// The Service port (name or number) of muster's ops listener.
    #[arg(long, global = true, default_value = "ops")]
    muster_port: String,
    /// Ask muster at this http:// URL instead of through the API server (a port-forward, a
    /// local muster).
    #[arg(long, global = true, env = "MUSTER_URL")]
    muster_url: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every gang muster knows: source, phase, members present/placed/minimum, seats, age, why it waits.
    Gangs,
    /// Why POD waits (or where it went): its gang's decision and numbers, kube-scheduler's condition, its Events.
    Why { pod: String },
    /// One gang in full: quorum, tasks, members and their seats.
    Describe { gang: String },
}

async fn client(args: &Args) -> Result<(kube::Client, String)> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}: cannot read it", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("--kubeconfig {}: not usable", path.display()))?
        }
        None => match kube::Config::from_kubeconfig(&options).await {
            Ok(c) => c,
            Err(e) => bail!(
                "no usable kubeconfig ({e}): set KUBECONFIG or pass --kubeconfig, as for kubectl"
            ),
        },
    };
    let ns = config.default_namespace.clone();
    // A user waits for an answer: a 503 from the service proxy means muster is unreachable
    // (the fallback), not something to retry for seconds.
    let mut config = config;
    config.default_retry = false;
    Ok((
        kube::Client::try_from(config).context("cannot build a Kubernetes client")?,
        ns,
    ))
}

/// `NAME` or `NAMESPACE/NAME`.
fn split(arg: &str, default_ns: &str) -> (String, String) {
    match arg.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (default_ns.to_string(), arg.to_string()),
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

async fn run(args: Args) -> Result<String> {
    let (client, context_ns) = client(&args).await?;
    let ns = args.namespace.clone().unwrap_or(context_ns);
    let muster = Muster {
        namespace: args.muster_namespace.clone(),
        service: args.muster_service.clone(),
        port: args.muster_port.clone(),
        url: args.muster_url.clone(),
    };
    let gangs = muster.gangs(&client).await;
    match &args.command {
        Command::Gangs => Ok(match gangs {
            Ok(gangs) => {
                let shown: Vec<Gang> = gangs
                    .into_iter()
                    .filter(|g| args.all_namespaces || g.namespace == ns)
                    .collect();
                render::gangs_table(&shown, now())
            }
            Err(why) => {
                let scope = (!args.all_namespaces).then_some(ns.as_str());
                let pgs = source::podgroups(&client, scope).await;
                render::unreachable_banner(&why) + &render::podgroups_table(&pgs)
            }
        }),
        Command::Why { pod } => {
            let (pns, pname) = split(pod, &ns);
            let (obj, facts) = source::pod_facts(&client, &pns, &pname).await?;
            match gangs {
                Ok(gangs) => {
                    let gang = gangs
                        .iter()
                        .find(|g| g.namespace == pns && g.members.iter().any(|m| m.name == pname));
                    match gang {
                        Some(g) => Ok(render::why(&facts, g)),
                        None if !source::has_gang_key(&obj) => bail!(
                            "pod {pns}/{pname} is not in a gang: it carries no gang key \
                             (muster.dev/group, a PodGroup name, kueue.x-k8s.io/pod-group-name), \
                             so kube-scheduler schedules it alone"
                        ),
                        None => bail!(
                            "pod {pns}/{pname} carries a gang key, but muster lists no gang with \
                             it (finished, or muster has not seen it yet)"
                        ),
                    }
                }
                Err(why) => {
                    let named = source::named_podgroup(&obj);
                    let mut pg = None;
                    for (api, name) in named {
                        pg = source::podgroup(&client, api, &pns, &name).await;
                        if pg.is_some() {
                            break;
                        }
                    }
                    Ok(render::unreachable_banner(&why)
                        + &render::why_fallback(&facts, pg.as_ref()))
                }
            }
        }
        Command::Describe { gang } => {
            let (gns, gname) = split(gang, &ns);
            match gangs {
                Ok(gangs) => match gangs.iter().find(|g| g.namespace == gns && g.name == gname) {
                    Some(g) => Ok(render::describe(g, now())),
                    None => bail!(
                        "muster knows no gang {gns}/{gname} (`kubectl muster gangs -A` lists them)"
                    ),
                },
                Err(why) => {
                    let pgs: Vec<_> = source::podgroups(&client, Some(&gns))
                        .await
                        .into_iter()
                        .filter(|p| p.name == gname)
                        .collect();
                    if pgs.is_empty() {
                        bail!(
                            "muster is not reachable ({why}), and no PodGroup {gns}/{gname} exists"
                        );
                    }
                    Ok(render::unreachable_banner(&why) + &render::podgroups_table(&pgs))
                }
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
