//! gopt-passes: the optimizer. A verified, specialized graph goes into an e-graph
//! ([`lang`], [`analysis`], [`convert`]), is saturated with the rule tables in [`rules`]
//! under named budgets, and comes back out as the cheapest equivalent under the roofline
//! [`cost`] model of the target ([`extract`]); convolutional graphs then switch to
//! channels-last ([`nhwc`]) and neighbouring element-wise ops are grouped into single
//! kernels ([`group`]). [`bucket`] chooses the shape buckets a model
//! is specialized for; [`decoder`] turns a decoder exported with a KV cache into its
//! prefill and decode steps, the cache written in place. [`report`] says what happened, in numbers and in words.
#![warn(missing_docs)]

pub mod analysis;
pub mod bucket;
pub mod convert;
pub mod cost;
pub mod decoder;
pub mod explain;
pub mod extract;
pub mod group;
pub mod lang;
pub mod nhwc;
pub mod quantize;
pub mod report;
pub mod rules;
pub mod shard;
pub mod split_weights;

use egg::{BackoffScheduler, Runner, StopReason};
use gopt_ir::{DType, Verified};
use std::time::{Duration, Instant};

pub use cost::Target;
pub use report::PassReport;

/// Errors of the optimizer.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// An IR error while converting or verifying.
    #[error(transparent)]
    Ir(#[from] gopt_ir::IrError),
    /// An option that cannot be honoured.
    #[error("{0}")]
    Option(String),
    /// A bug in the optimizer (a rewrite produced an invalid graph, ...).
    #[error("optimizer bug: {0}")]
    Internal(String),
    /// The compile ran past its wall-clock limit ([`Budgets::time`]). The limit never
    /// shapes the output: a compile either finishes within it, with the result the
    /// deterministic budgets give, or stops with this error.
    #[error(
        "compile exceeded --time-limit {} s in stage {stage}{}; raise it or lower \
         --max-iterations/--max-nodes",
        fmt_secs(.limit),
        .bucket.as_ref().map(|b| format!(", bucket {b}")).unwrap_or_default()
    )]
    TimeLimit {
        /// The limit.
        limit: Duration,
        /// The stage that was running or had just finished (`import`, `saturate`, ...).
        stage: String,
        /// The bucket being compiled, if any (`batch=1 seq=128`).
        bucket: Option<String>,
    },
}

impl PassError {
    /// A [`PassError::TimeLimit`] gets the bucket it happened in; other errors are
    /// returned as they are.
    pub fn in_bucket(self, name: &str) -> PassError {
        match self {
            PassError::TimeLimit {
                limit,
                stage,
                bucket: None,
            } => PassError::TimeLimit {
                limit,
                stage,
                bucket: Some(name.to_string()),
            },
            e @ (PassError::Ir(_)
            | PassError::Option(_)
            | PassError::Internal(_)
            | PassError::TimeLimit { .. }) => e,
        }
    }
}

/// Seconds as the user wrote them: `1`, `0.005`, `2.5`.
fn fmt_secs(d: &Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Result alias of the optimizer.
pub type Result<T> = std::result::Result<T, PassError>;

/// Saturation stops after this many iterations (a deterministic budget: it shapes the
/// output the same way on every machine).
pub const ITER_LIMIT: usize = 24;
/// Saturation stops when the e-graph holds more than this many e-nodes (checked after
/// each rule's search and application: deterministic too).
pub const NODE_LIMIT: usize = 400_000;

/// A pass that can be switched off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Pass {
    /// Epilogue, normalization, attention, sibling-GEMM and element-wise fusion.
    Fusion,
    /// Padding GEMM dims to the tile; channels-last (NHWC) convolutions.
    Layout,
    /// Low-precision math (with `--precision bf16|fp16`).
    Precision,
    /// Shape buckets for symbolic dims.
    Bucketing,
}

impl Pass {
    /// Every pass, by name.
    pub const ALL: [(&'static str, Pass); 4] = [
        ("fusion", Pass::Fusion),
        ("layout", Pass::Layout),
        ("precision", Pass::Precision),
        ("bucketing", Pass::Bucketing),
    ];

    /// The pass with this name.
    pub fn from_name(s: &str) -> Option<Pass> {
        Pass::ALL.iter().find(|(n, _)| *n == s).map(|(_, p)| *p)
    }
}

/// The math precision requested for GEMMs, convolutions and attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Precision {
    /// fp32 everywhere.
    Fp32,
    /// fp32 storage, tf32 tensor-core math (no graph change; the backends' GEMM mode).
    Tf32,
    /// bf16 inputs, fp32 accumulation.
    Bf16,
    /// fp16 inputs, fp32 accumulation.
    Fp16,
}

impl Precision {
    /// Parses `fp32|tf32|bf16|fp16`.
    pub fn from_name(s: &str) -> Option<Precision> {
        match s {
            "fp32" | "f32" => Some(Precision::Fp32),
            "tf32" => Some(Precision::Tf32),
            "bf16" => Some(Precision::Bf16),
            "fp16" | "f16" => Some(Precision::Fp16),
            _ => None,
        }
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
        }
    }
}

/// Compile budgets. The iteration and e-node limits shape the output and are
/// deterministic: the same model and options give the same graph on any machine, at any
/// load. The wall-clock limit never shapes the output: it is a deadline for the whole
/// compile, checked between stages and during saturation, and passing it is an error
/// ([`PassError::TimeLimit`]).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Budgets {
    /// Iteration limit of saturation.
    pub iterations: usize,
    /// E-node limit of saturation.
    pub nodes: usize,
    /// Wall-clock limit of a whole compile (`None`: none).
    pub time: Option<Duration>,
    /// When the running compile must be done by: set by [`Budgets::start`] when a
    /// compile begins, so that every stage and bucket shares one deadline.
    #[serde(skip)]
    pub deadline: Option<Instant>,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            iterations: ITER_LIMIT,
            nodes: NODE_LIMIT,
            time: None,
            deadline: None,
        }
    }
}

impl Budgets {
    /// These budgets with the deadline of a compile starting now (kept if one is
    /// already running).
    pub fn start(self) -> Budgets {
        let deadline = self
            .deadline
            .or_else(|| self.time.and_then(|t| Instant::now().checked_add(t)));
        Budgets { deadline, ..self }
    }

    /// Fails with [`PassError::TimeLimit`] when the deadline has passed; `stage` is
    /// what was running.
    pub fn check(&self, stage: &str) -> Result<()> {
        match (self.time, self.deadline) {
            (Some(limit), Some(d)) if Instant::now() > d => Err(PassError::TimeLimit {
                limit,
                stage: stage.to_string(),
                bucket: None,
            }),
            _ => Ok(()),
        }
    }

    /// Time left before the deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// What to optimize for and how.
#[derive(Clone, Debug)]
pub struct Config {
    /// Requested precision.
    pub precision: Precision,
    /// Passes switched off.
    pub disabled: Vec<Pass>,
    /// Saturation budgets.
    pub budgets: Budgets,
    /// The device the cost model describes (its rates, launch costs and tile sizes):
    /// what extraction minimizes, not the backend code is generated for.
    pub device: Target,
    /// Record the rewrites behind each kernel ([`explain`]): the report's `chains`.
    pub explain: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            precision: Precision::Fp32,
            disabled: Vec::new(),
            budgets: Budgets::default(),
            device: Target::h200(),
            explain: false,
        }
    }
}

impl Config {
    /// Whether `p` runs.
    pub fn enabled(&self, p: Pass) -> bool {
        !self.disabled.contains(&p)
    }

    /// The low storage type when a low precision is requested and the pass is on.
    pub fn low_precision(&self) -> Option<DType> {
        if !self.enabled(Pass::Precision) {
            return None;
        }
        match self.precision {
            Precision::Bf16 => Some(DType::BF16),
            Precision::Fp16 => Some(DType::F16),
            Precision::Fp32 | Precision::Tf32 => None,
        }
    }

    /// The target the cost model describes under these options (tf32 and the low
    /// precision set from them): what extraction minimizes and reports estimate.
    pub fn cost_target(&self) -> Target {
        let mut t = self.device.clone();
        t.tf32 = self.precision == Precision::Tf32 && self.enabled(Pass::Precision);
        t.low_precision = self.low_precision();
        t
    }
}

/// An optimized graph and the report of how it was obtained.
#[derive(Debug)]
pub struct Optimized {
    /// The graph, verified again.
    pub graph: Verified,
    /// What the optimizer did.
    pub report: PassReport,
}

/// Optimizes a verified graph (normally specialized to one bucket). The graph is taken
/// by value: its weights move into the e-graph and back out, never copied.
pub fn optimize(g: Verified, cfg: &Config) -> Result<Optimized> {
    let budgets = cfg.budgets.start();
    budgets.check("bind+fold")?;
    let start = Instant::now();
    let target = cfg.cost_target();
    // "Before" is costed as the user's graph runs today: fp32, no precision policy.
    let plain = Target {
        low_precision: None,
        ..target.clone()
    };
    let before = report::census(&g, &plain);
    let mut source = g.into_inner();
    // MatMulNBits with every optional input slot, the form the rules match.
    for n in &mut source.nodes {
        if n.op == gopt_ir::Op::Nn(gopt_ir::ops::NnOp::MatMulNBits) {
            n.inputs.resize(6, None);
        }
    }
    let consts = std::mem::take(&mut source.constants);
    let (loaded, imported) = match cfg.explain {
        true => explain::to_egraph_explained(&source, consts)?,
        false => (convert::to_egraph_parts(&source, consts)?, 0),
    };
    let rules = rules::table(cfg);
    budgets.check("convert")?;
    // egg checks its time limit after each rule's search and application: here it is
    // what is left of the compile's deadline, and hitting it is an error below, so it
    // never decides what the e-graph holds.
    let runner = Runner::default()
        .with_egraph(loaded.egraph)
        .with_iter_limit(budgets.iterations)
        .with_node_limit(budgets.nodes)
        .with_time_limit(budgets.remaining().unwrap_or(Duration::MAX))
        .with_scheduler(BackoffScheduler::default())
        .run(&rules);
    let saturate_ms = start.elapsed().as_secs_f64() * 1e3;
    let stop = match &runner.stop_reason {
        Some(StopReason::Saturated) => report::Stop::Saturated,
        Some(StopReason::IterationLimit(n)) => report::Stop::IterationLimit(*n),
        Some(StopReason::NodeLimit(n)) => report::Stop::NodeLimit(*n),
        Some(StopReason::TimeLimit(_)) => {
            return Err(PassError::TimeLimit {
                limit: budgets.time.unwrap_or_default(),
                stage: "saturate".into(),
                bucket: None,
            })
        }
        Some(StopReason::Other(s)) => {
            return Err(PassError::Internal(format!("saturation stopped: {s}")))
        }
        None => report::Stop::NotRun,
    };
    let t1 = Instant::now();
    let mut wanted = loaded.roots.clone();
    wanted.extend(loaded.pinned.iter().map(|(c, _)| *c));
    let ex = extract::extract_until(&runner.egraph, &target, &wanted, budgets.deadline);
    if ex.timed_out {
        return Err(PassError::TimeLimit {
            limit: budgets.time.unwrap_or_default(),
            stage: "extract".into(),
            bucket: None,
        });
    }
    let rebuilt = convert::to_graph(
        &runner.egraph,
        &ex.choice,
        &loaded.roots,
        &loaded.names,
        &loaded.pinned,
        &source,
    )?;
    let chains = match cfg.explain {
        true => explain::chains(
            &runner.egraph,
            &target,
            imported,
            &ex.choice,
            &rebuilt,
            &source,
        ),
        false => Vec::new(),
    };
    let Runner {
        egraph, iterations, ..
    } = runner;
    let table = egraph.analysis.consts.clone();
    drop(egraph);
    let out = rebuilt.fill_constants(&table);
    let mut out = gopt_ir::verify(out)
        .map_err(|e| PassError::Internal(format!("extracted graph does not verify: {e}")))?
        .into_inner();
    let extract_ms = t1.elapsed().as_secs_f64() * 1e3;
    budgets.check("extract")?;
    let t_layout = Instant::now();
    let channels_last = if cfg.enabled(Pass::Layout) {
        nhwc::to_channels_last(&mut out)?
    } else {
        0
    };
    let layout_ms = t_layout.elapsed().as_secs_f64() * 1e3;
    budgets.check("layout")?;
    let t2 = Instant::now();
    let grouped = if cfg.enabled(Pass::Fusion) {
        group::fuse_elementwise(&mut out)?
    } else {
        0
    };
    out.prune();
    let graph = gopt_ir::verify(out)
        .map_err(|e| PassError::Internal(format!("optimized graph does not verify: {e}")))?;
    let group_ms = t2.elapsed().as_secs_f64() * 1e3;
    budgets.check("group")?;
    let after = report::census(&graph, &plain);
    let mut report = PassReport::new(report::Inputs {
        iterations: &iterations,
        stop,
        before,
        after,
        grouped,
        channels_last,
        graph: &graph,
        cfg,
        timings: vec![
            ("saturate".into(), saturate_ms),
            ("extract".into(), extract_ms),
            ("layout".into(), layout_ms),
            ("group".into(), group_ms),
        ],
    });
    report.keep_chains(chains);
    Ok(Optimized { graph, report })
}
