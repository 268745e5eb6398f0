//! `gopt run`: runs a model on input files and prints (and optionally writes) its
//! outputs.

use super::{
    adapter_name, backend_cannot, fmt_duration, fmt_num, outln, BackendChoice, DeviceArgs,
};
use anyhow::{Context, Result};
use gopt::tensor_io::{file_stem, read_tensor, unique_stems, write_tensor, Summary, TensorFormat};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Run a model on input tensors and print or save its outputs.
#[derive(clap::Args)]
#[command(
    long_about = "Imports the model, reads each input from a .npy or .pb (ONNX TensorProto) \
                  file, checks it against the input's declared dtype and dims (binding \
                  symbolic dims such as `batch` to the sizes given), runs the model and \
                  prints, for each output, its dtype, shape, min/max/mean/std and first \
                  values. With -o the outputs are written to a folder, one file per output \
                  named after it. A dtype, rank or shape mismatch is an error (exit 2) that \
                  names the input and what was expected. The model is compiled first: \
                  specialized to the bucket that holds the inputs (inputs padded, outputs \
                  sliced back) and optimized with the same options as `gopt compile`; \
                  `--disable all` runs it as imported.",
    after_help = "Examples:\n  \
        gopt run model.onnx --input input_ids=ids.npy --input attention_mask=mask.npy\n  \
        gopt run model.onnx -i input_0.pb -i input_1.pb -o out/ --format pb\n  \
        gopt run tests/data/models/mobilenet_v2/model.onnx \\\n      \
        -i tests/data/models/mobilenet_v2/test_data_set_0/input_0.pb --json\n  \
        gopt run model.onnx -i x.npy --backend wgpu --adapter llvmpipe\n  \
        gopt compile model.onnx --target wgsl -o out/ && gopt run out/ -i x.npy"
)]
pub struct Args {
    #[command(flatten)]
    pub tp: super::tensor_parallel::TpArgs,
    /// The model file (.onnx), or an artifact folder `gopt compile -o DIR` wrote (its
    /// plans run without optimizing again, once every file matches the SHA-256 its
    /// plan.json records).
    pub model: PathBuf,
    /// An input as NAME=FILE, or FILE alone to bind the next unbound input in order.
    /// FILE is .npy or .pb. Repeat for each input.
    #[arg(short, long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Write each output to DIR/<output name>.<format> (DIR is created if needed;
    /// characters unsafe in file names become `_`, and names that then coincide get
    /// `_2`, `_3`, ...).
    #[arg(short, long = "output-dir", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// File format of written outputs (bf16 outputs are written as float32 in .npy).
    #[arg(long, value_enum, default_value_t = Format::Npy)]
    pub format: Format,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opt: super::compile::OptArgs,
}

/// Output file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// NumPy .npy.
    Npy,
    /// ONNX TensorProto .pb.
    Pb,
}

#[derive(Serialize)]
struct OutputReport {
    name: String,
    #[serde(flatten)]
    summary: Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
}

#[derive(Serialize)]
struct Report {
    model: String,
    backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter: Option<String>,
    /// Why `--backend auto` passed over the backends before it, and what the backend
    /// changed (a bf16 request run as f16 on wgpu).
    notes: Vec<String>,
    import_ms: f64,
    run_ms: f64,
    outputs: Vec<OutputReport>,
}

/// Runs `gopt run`.
pub fn main(args: &Args) -> Result<ExitCode> {
    if super::tensor_parallel::is_artifact(&args.model) {
        return run_ranks(args);
    }
    super::tensor_parallel::refuse(&args.tp, "run")?;
    let t0 = Instant::now();
    // A folder is an artifact `gopt compile -o` wrote: its plans run as compiled, after
    // every file is checked against the hashes its plan records.
    let mut opts = args.opt.options()?;
    let mut loaded = None;
    let model = if args.model.is_dir() {
        opts = args.device.apply_loaded(opts);
        let c = gopt::Compiled::load(&args.model, &opts)
            .with_context(|| format!("cannot load the artifact {}", args.model.display()))?;
        let m = c.model().clone();
        loaded = Some(c);
        m
    } else {
        gopt::load_model(&args.model)
            .with_context(|| format!("cannot import {}", args.model.display()))?
    };
    let import_time = t0.elapsed();
    let graph = &model.model.graph;
    let names = gopt::input_names(graph);
    let mut given = Vec::new();
    for spec in &args.inputs {
        let (name, path) = split_spec(spec, &names);
        let (_, t) =
            read_tensor(Path::new(path)).with_context(|| format!("cannot read input {spec}"))?;
        given.push((name.map(str::to_string), t));
    }
    let inputs = gopt::order_inputs(graph, given)?;
    let out_names = gopt::output_names(graph);
    let t1 = Instant::now();
    if let Some(c) = loaded {
        let (outputs, notes) = run_artifact(args, c, &mut opts, &inputs)?;
        return finish(args, &opts, notes, outputs, &out_names, import_time, t1);
    }
    let (candidates, mut notes) = args.device.candidates();
    let mut outputs = None;
    for (k, &backend) in candidates.iter().enumerate() {
        let last = k + 1 == candidates.len();
        if let Err(e) = args.device.apply(&mut opts, backend) {
            if last {
                return Err(e);
            }
            notes.push(format!("{}: {e:#}", backend.name()));
            continue;
        }
        let attempt = {
            gopt::Compiled::new(&model, &opts)
                .and_then(|mut c| {
                    notes.extend(c.notes().iter().cloned());
                    c.run(&inputs)
                })
                .map_err(anyhow::Error::from)
        };
        match attempt {
            Ok(o) => {
                outputs = Some(o);
                break;
            }
            Err(e) if !last && e.downcast_ref().is_some_and(backend_cannot) => {
                notes.push(format!("{}: {e:#}", backend.name()));
            }
            Err(e) => {
                return Err(e.context(format!(
                    "cannot run {} on {}",
                    args.model.display(),
                    opts.get_backend().name()
                )))
            }
        }
    }
    let outputs = outputs.context("no backend to run on")?;
    finish(args, &opts, notes, outputs, &out_names, import_time, t1)
}

/// Runs a tensor-parallel artifact (`gopt compile --tensor-parallel N -o DIR`) on its
/// N GPUs.
fn run_ranks(args: &Args) -> Result<ExitCode> {
    let t0 = Instant::now();
    let mut given = Vec::new();
    for spec in &args.inputs {
        // The names are checked against the artifact's inputs when it is opened.
        let (name, path) = match spec.split_once('=') {
            Some((n, f)) if !Path::new(spec).exists() && !n.is_empty() => (Some(n), f),
            _ => (None, spec.as_str()),
        };
        let (_, t) =
            read_tensor(Path::new(path)).with_context(|| format!("cannot read input {spec}"))?;
        given.push((name.map(str::to_string), t));
    }
    let import_time = t0.elapsed();
    let t1 = Instant::now();
    let (outputs, names, notes) =
        super::tensor_parallel::run_artifact(&args.model, &args.tp, given)?;
    let opts = args.opt.options()?.backend(gopt::Backend::Cuda);
    finish(args, &opts, notes, outputs, &names, import_time, t1)
}

/// Runs a loaded artifact: on its own backend (`--backend auto` or the same one), else
/// its `model.onnx` compiled again for the backend asked for, said in a note.
fn run_artifact(
    args: &Args,
    c: gopt::Compiled,
    opts: &mut gopt::pipeline::Options,
    inputs: &[gopt::Tensor],
) -> Result<(Vec<gopt::Tensor>, Vec<String>)> {
    let own = c.backend();
    let want = match args.device.backend {
        BackendChoice::Auto => own,
        BackendChoice::Only(b) => b,
    };
    let mut notes = Vec::new();
    let mut c = if want == own {
        *opts = std::mem::take(opts).backend(own);
        c
    } else {
        args.device.apply(opts, want)?;
        notes.push(format!(
            "the artifact was compiled for {}; --backend {} runs its model.onnx, compiled \
             again for {} at its precision ({})",
            own.name(),
            want.name(),
            want.name(),
            c.options().get_config().precision.name()
        ));
        c.recompiled_for(opts)
    };
    notes.extend(c.notes().iter().cloned());
    let outputs = c.run(inputs).with_context(|| {
        format!(
            "cannot run {} on {}",
            args.model.display(),
            opts.get_backend().name()
        )
    })?;
    Ok((outputs, notes))
}

/// Reports the outputs and writes them with `-o`.
fn finish(
    args: &Args,
    opts: &gopt::pipeline::Options,
    notes: Vec<String>,
    outputs: Vec<gopt::Tensor>,
    out_names: &[String],
    import_time: std::time::Duration,
    t1: Instant,
) -> Result<ExitCode> {
    let run_time = t1.elapsed();
    let format = match args.format {
        Format::Npy => TensorFormat::Npy,
        Format::Pb => TensorFormat::Pb,
    };
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create output folder {}", dir.display()))?;
    }
    let names: Vec<String> = (0..outputs.len())
        .map(|k| {
            out_names
                .get(k)
                .cloned()
                .unwrap_or_else(|| format!("output_{k}"))
        })
        .collect();
    // Output names that sanitize to one file name (`a/b`, `a_b`) get distinct files.
    let stems: Vec<String> = names.iter().map(|n| file_stem(n)).collect();
    let stems = unique_stems(&stems);
    let mut reports = Vec::new();
    for ((t, name), stem) in outputs.iter().zip(names).zip(&stems) {
        let file = match &args.out {
            Some(dir) => {
                let path = dir.join(format!("{stem}.{}", format.extension()));
                write_tensor(&path, &name, t, format)
                    .with_context(|| format!("cannot write output `{name}`"))?;
                Some(path.display().to_string())
            }
            None => None,
        };
        reports.push(OutputReport {
            name,
            summary: Summary::of(t),
            file,
        });
    }
    let report = Report {
        model: args.model.display().to_string(),
        backend: opts.get_backend().name(),
        adapter: adapter_name(opts),
        notes,
        import_ms: import_time.as_secs_f64() * 1e3,
        run_ms: run_time.as_secs_f64() * 1e3,
        outputs: reports,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report, import_time, run_time);
    }
    Ok(ExitCode::SUCCESS)
}

/// Splits `NAME=FILE` when NAME is one of the graph's inputs; anything else is a path.
fn split_spec<'a>(spec: &'a str, names: &[String]) -> (Option<&'a str>, &'a str) {
    if let Some((n, f)) = spec.split_once('=') {
        if names.iter().any(|x| x == n) {
            return (Some(n), f);
        }
        if !Path::new(spec).exists() && !n.is_empty() {
            // Looks like NAME=FILE with an unknown NAME: let order_inputs name the inputs.
            return (Some(n), f);
        }
    }
    (None, spec)
}

fn print_text(r: &Report, import: std::time::Duration, run: std::time::Duration) {
    outln!(
        "ran {} on {}{} in {} (import {})",
        r.model,
        r.backend,
        r.adapter
            .as_ref()
            .map(|a| format!(" [{a}]"))
            .unwrap_or_default(),
        fmt_duration(run),
        fmt_duration(import)
    );
    for n in &r.notes {
        outln!("  note: {n}");
    }
    for o in &r.outputs {
        let s = &o.summary;
        let stat = |v: Option<f64>| v.map(fmt_num).unwrap_or_else(|| "-".into());
        let mut line = format!(
            "{}: {} {:?}  min {}  max {}  mean {}  std {}",
            o.name,
            s.dtype,
            s.shape,
            stat(s.min),
            stat(s.max),
            stat(s.mean),
            stat(s.std)
        );
        if s.nans > 0 {
            line.push_str(&format!("  nan {}", s.nans));
        }
        outln!("{line}");
        let lead: Vec<String> = s.leading.iter().map(|&v| fmt_num(v)).collect();
        let n: usize = s.shape.iter().product();
        let more = if n > lead.len() { ", ..." } else { "" };
        outln!("  [{}{more}]", lead.join(", "));
        if let Some(f) = &o.file {
            outln!("  wrote {f}");
        }
    }
}
