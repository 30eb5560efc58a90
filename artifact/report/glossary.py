"""Terms of art the report uses, defined once: the report's glossary section and
docs/glossary.md (tests/test_report.py checks the two agree)."""

from artifact.estimate.memory import FIT_MARGIN

GLOSSARY: tuple[tuple[str, str], ...] = (
    (
        "overlap mode",
        "collectives are issued asynchronously and waited for only when their result is needed, so compute kernels run beside communication kernels (the frameworks' default).",
    ),
    (
        "sequential mode",
        "every collective is ordered after the compute before it and before the compute after it, by stream order alone (no host waits), so no compute kernel runs beside a communication kernel; the paper's 'compute in isolation' baseline.",
    ),
    (
        "nocomm",
        "a mode in which collectives become no-ops on buffers of the same shape: the same compute with no communication at all. It checks the sequential baseline (V1).",
    ),
    (
        "phase",
        "a mode measured under a name of its own, each one timed in every repetition: overlap, sequential and nocomm; overlap_repeat (the A/A check's second overlap pass); overlap_control and sequential_control (the zero-byte controls); comm_alone (the microbenchmark's collectives with no compute beside them).",
    ),
    (
        "A/A check",
        "the overlap mode measured twice in the same repetition. The difference between two identical passes (Eq. 1 applied to them) is the noise floor.",
    ),
    (
        "noise floor",
        "the slowdown that two identical overlap passes show (the A/A check): a measured slowdown within it is not evidence of contention.",
    ),
    (
        "negative control",
        "a measurement whose true value is 0: Eq. 1 and the sequential penalty with no data moved (zero-byte collectives on several GPUs; the configuration itself on one). A control that does not read 0 makes the claims resting on it inconclusive.",
    ),
    (
        "zero-byte control",
        "the overlap and sequential modes run once more with every collective on zero bytes: the same code path with no data moved, where the collectives would move data (several GPUs, or --emulate-world). A slowdown or penalty 'beyond its control' is its value less the control's, paired by repetition.",
    ),
    (
        "sequential penalty",
        "how much slower sequential is than overlap end to end: (E2E sequential - E2E overlap) / E2E overlap, in % (the paper's Fig. 5).",
    ),
    (
        "V1",
        "the artifact's check of the sequential baseline: sequential's compute kernels must take as long as nocomm's, within 1 point, or Eq. 1's baseline would itself be slowed.",
    ),
    (
        "V2",
        "the artifact's check of Eq. 4's ideal, which the paper derives and never measures: delays injected into the microbenchmark's communication must move E2E as the equations predict.",
    ),
    (
        "emulated (--emulate-world W)",
        "rank 0 of a W-GPU run alone on one GPU under torch's fake process group, its collectives' bytes moved as paced local copies. Its rows are a preview: shown beside the paper's numbers, never counted.",
    ),
    (
        "settling",
        "before timed iterations, the work about to be timed runs until its step time and the GPU's clock are steady (bounded), so no phase inherits the previous one's power state.",
    ),
    (
        "interleaved rounds",
        "how training times its phases: each round runs every phase once (in a row of the Williams design), so a slow spell of the host that lasts seconds falls on every phase alike.",
    ),
    (
        "timed pass",
        "the iterations a phase is timed over (training: its interleaved rounds), at least the preset's iterations and seconds; its E2E is their median.",
    ),
    (
        "profiled pass",
        "the iterations a phase runs under torch.profiler after its timed pass, for its kernel times (Eq. 1) and overlap fraction: the preset's iterations, or at the review and paper presets at least one and 2 s, so a long step is profiled once.",
    ),
    (
        "round-adjusted E2E",
        "a phase's E2E from interleaved rounds: the median over rounds of its iteration's share of the round's mean, times the median round mean; phases are compared within rounds.",
    ),
    (
        "Williams design",
        "an order of the phases across repetitions in which each phase runs first, and follows every other phase, equally often.",
    ),
    (
        "Eq. 1",
        "the paper's compute slowdown: (compute time under overlap - compute time sequential) / compute time sequential, shown in %.",
    ),
    ("Eq. 2", "the paper's second equation; the artifact does not use it."),
    ("Eq. 3", "the same slowdown as a time: compute time under overlap - compute time sequential."),
    (
        "Eq. 4",
        "the ideal end-to-end time: overlapped end-to-end time - Eq. 3's slowdown, i.e. overlap without contention.",
    ),
    (
        "E2E",
        "end-to-end time of one training iteration (or one microbenchmark iteration), measured with device-synchronised timers (training) or CUDA events between iterations queued back to back (microbenchmarks).",
    ),
    ("ideal", "Eq. 4's end-to-end time (derived)."),
    (
        "max-ideal",
        "another bound on overlapped time (ConCCL's): the longer of compute alone and communication alone, each measured.",
    ),
    (
        "MFU",
        "model FLOPs utilisation: the achieved training FLOP/s divided by the GPU's peak, measured at run time with back-to-back matrix products.",
    ),
    (
        "CTA",
        "cooperative thread array, a CUDA thread block. NCCL runs each collective on a number of CTAs; the contention map limits that number to see how much compute it takes.",
    ),
    (
        "world size (w1, w4)",
        "the number of processes (one per GPU) in the run; 'w1' in a configuration name means world size 1.",
    ),
    (
        "recomputation (rc)",
        "activation recomputation: a block keeps only its input in the forward pass and runs "
        "again in the backward pass, about a third more compute for much less memory; '_rc' "
        "ending a configuration name means it is on.",
    ),
    (
        "fits",
        f"a configuration fits a GPU where its estimated peak memory per GPU plus a {FIT_MARGIN:.0%} margin "
        "(room for the estimate's error and for PyTorch's caching allocator's fragmentation, "
        "chosen from one H200's measurements) is "
        "at most the GPU's memory; one that does not is recorded 'not run'.",
    ),
    (
        "micro-batch (mb8)",
        "the sequences one GPU processes in one forward and backward pass; 'mb8' means micro-batch 8.",
    ),
    (
        "(s)",
        "in a source column: a secondary reading of the paper (read off a chart or inferred from its text), not a number printed in it.",
    ),
    (
        "GPT-3 XL",
        "the GPT-3 paper's name for its 1.3B-parameter model (gpt3-1.3b here).",
    ),
    (
        "TDP",
        "thermal design power. '% of TDP' is power as a share of the GPU's enforced power limit, read through NVML or AMD-SMI.",
    ),
    (
        "noisy",
        "a flag on a summary row whose spread over repetitions is large: its coefficient of variation (standard deviation over |mean|) is above 5 %.",
    ),
    (
        "proxy",
        "with one GPU an all-reduce moves no data, so the microbenchmark also runs a labelled stand-in beside the compute (NCCL's one-rank kernel, or a device-to-device copy of the same size). Proxy rows are evidence about one GPU only and never count toward the paper's tally.",
    ),
    (
        "V3",
        "the artifact's third check: the overlap fraction shown beside every slowdown, so that 'no slowdown' where nothing overlapped is not read as 'overlap is free'.",
    ),
    (
        "overlap fraction",
        "the share of communication time during which compute kernels run at the same time: time both kinds of kernel run / communication time, from the profiler trace of the overlap mode.",
    ),
    (
        "SM",
        "streaming multiprocessor, the GPU's unit of compute; a kernel runs on some or all of them. NCCL's kernels occupy a few SMs while they move data; the artifact reads the SM clock while a phase settles and beside power.",
    ),
    (
        "NCCL-shaped stand-in",
        "what --emulate-world --stand-in nccl-shaped moves rank 0's bytes with: one persistent kernel of C CTAs a collective (C: NCCL's channel count for the GPU model), each holding its SM until the collective ends, reading what rank 0 sends, writing what it receives and reading two operands and writing one for each reduced chunk, paced to the link. The default stand-in, copy, moves the same bytes as copies.",
    ),
    (
        "co-located NCCL ranks",
        "W real NCCL ranks on one GPU, in one process, one thread and communicator a rank (NCCL 2.30 or newer, NCCL_MULTI_RANK_GPU_ENABLE): NCCL's own kernels beside the compute, the ground truth the stand-in is checked against.",
    ),
    (
        "SMs held",
        "the contention map's one-GPU kernel that occupies C SMs by spinning, for as long as a ring all-reduce would take on the link, and moves no bytes: the share of a slowdown that comes from the SMs a collective takes.",
    ),
    (
        "twin",
        "the NCCL-shaped stand-in doing every co-located rank's ring with the same total CTAs and bytes, paced to the time co-located NCCL took a collective; the stand-in is validated on a GPU model where the twin's slowdown is within 3 points of co-located NCCL's.",
    ),
    (
        "copy engine",
        "a GPU's DMA unit that moves memory without using SMs; the copy proxy's device-to-device copy runs on it.",
    ),
    (
        "scaled MAD",
        "the median absolute deviation times 1.4826, a spread that one stalled iteration cannot inflate; an iteration more than 5 scaled MADs (and 5 %) from the median is counted as an outlier.",
    ),
    (
        "precisions (FP32, TF32, FP16, BF16)",
        "32-bit floating point; TF32, NVIDIA's tensor-core format for FP32 matrix products (10-bit mantissa); 16-bit floating point; bfloat16 (FP32's exponent range with 8 bits of mantissa).",
    ),
    (
        "FSDP, FSDP2",
        "fully sharded data parallelism: parameters, gradients and optimizer state split across GPUs, gathered for each layer (all-gather) and reduced after it (reduce-scatter). The paper's FSDP is DeepSpeed ZeRO-3; FSDP2 is torch's own, run beside it as beyond the paper.",
    ),
    (
        "GEMM",
        "general matrix multiplication: the matrix product the microbenchmark times (an 8192 x 8192 product, its compute).",
    ),
    (
        "SDPA",
        "scaled dot-product attention, torch's fused attention kernel; the pipeline's Megatron-core layers call it.",
    ),
    (
        "NCCL / RCCL",
        "NVIDIA's and AMD's collective communication libraries (all-reduce, all-gather, reduce-scatter, send/receive), which torch.distributed calls.",
    ),
    (
        "NVML / AMD-SMI",
        "NVIDIA's and AMD's management libraries, through which the artifact reads power, energy, clocks and power limits.",
    ),
    (
        "CV",
        "coefficient of variation: the standard deviation over repetitions divided by |mean|.",
    ),
    (
        "reading",
        "one configuration's measured value of one quantity (a control, a V1 gap), from its own repetitions. Each tally counts a reading once.",
    ),
    (
        "same records as Fig. N",
        "a configuration this figure shares with Fig. N, whose records were copied from it rather than measured again (fig10's FP16 row is fig4's, fig11's FP32 row is fig10's, fig8's rows are fig6's). It is listed under both figures and counted once, under the figure that measured it (verdicts.csv: same_records_as, counted_in).",
    ),
    (
        "equivalence rule",
        "how every number is judged against its band: reproduced (or holds) where the whole 95 % CI lies within the band, not reproduced (fails) where it lies wholly outside, inconclusive where it reaches across an edge; the reason says which edge and by how much. A wide interval is no evidence of a match.",
    ),
    (
        "k of K configurations (of the paper's grid)",
        "for an item about the paper's whole grid (a mean or maximum over all models, both parallelisms): how many of the grid's configurations (at the paper preset) the run measured. Such an item is judged only where k = K.",
    ),
    (
        "Sidak interval",
        "the interval of a maximum over k configurations: each configuration's CI widened to the level 0.95^(1/k), so that all k hold together with 95 % probability; the maximum's interval runs from the largest lower end to the largest upper end.",
    ),
    (
        "delta method",
        "a standard error for a function of means (Eq. 1, a ratio) from its first-order expansion about them; paired by repetition where every repetition measures every input.",
    ),
    ("n", "the number of repetitions behind a mean; a verdict needs at least 5."),
    (
        "95% CI",
        "the 95 % confidence interval of a mean over repetitions (Student-t below 20 repetitions).",
    ),
    (
        "headline item",
        "an item of expected/*.yaml: a number or claim of the paper, the ones the report's tally counts. The review preset feeds every one but Fig. 9's (opt-in).",
    ),
    (
        "stopping rule",
        "adaptive repetitions: after a pilot of 5 repetitions, a configuration's repetitions are fixed once, so that each judged quantity's CI half-width comes to at most a quarter of its item's tolerance (Stein's two-stage size), at most the run's maximum (the preset's repetitions, or --reps). Run by `run --adaptive` (the decision in records/FIGURE/CONFIG/stopping.json; the quantities it was decided by report at least Stein's interval), priced by `plan --adaptive`.",
    ),
    (
        "contention map",
        "the artifact's own experiment beyond the paper (figure `contention`): a GEMM or an elementwise add beside one mechanism at a time (an all-reduce, NCCL's one-rank kernel, a copy-engine copy, SMs held with no bytes, the NCCL-shaped stand-in, co-located NCCL ranks), to tell what holds compute back. Measured, never counted among the paper's items.",
    ),
    (
        "not applicable / not run",
        "two reasons an item has no verdict. Not applicable: this machine cannot speak to it (one GPU, where the item needs ranks exchanging data; another GPU model; a CPU). Not run: another run could (a model or figure the preset leaves out, an opt-in figure, a failure); its reason names what is missing.",
    ),
    (
        "wave quantization",
        "a GEMM whose grid has one CTA per SM (persistent) runs in one wave; if a collective already holds some SMs when it starts, the CTAs left over run in a second wave, and the GEMM can take up to twice as long for a small share of SMs taken. The report reads the GEMM's grid and the GPU's SMs from the profiler to say whether it can happen.",
    ),
    (
        "holder-first / compute-first",
        "the contention map's launch orders: each collective queued before the compute it overlaps (holder-first, every base row), or after it (compute-first, the order axis). 'Holder first' in the report is the share of side-by-side kernel pairs whose collective started first, as the trace shows.",
    ),
    (
        "CTA policy / SM carve-out",
        "knobs of the mitigation axis. NCCL's CTA policy (a communicator setting, NCCL 2.27+): default, efficiency (the fewest CTAs for decent speed) or zero (copy engines where the buffers allow). torch's SM carve-out (torch._C._set_sm_carveout_experimental) makes cuBLAS leave that many SMs free for communication.",
    ),
    (
        "vs nocomm",
        "a slowdown against the nocomm mode (the same compute with no communication at all) rather than against sequential; used where V1 fails, so the sequential baseline is not compute alone.",
    ),
    (
        "compute beside communication",
        "the share of a configuration's compute-kernel time that ran while a communication kernel ran (from the profiler trace, overlap mode). Eq. 1 cannot exceed it times the slowdown of those kernels.",
    ),
    (
        "interval sweep",
        "how the overlap fraction is computed: the trace's compute and communication kernels as time intervals, swept in order of start time, summing the time both kinds are active.",
    ),
    (
        "MPS",
        "NVIDIA's Multi-Process Service: one server runs the kernels of several processes on a GPU side by side. The rehearsal starts a daemon of its own only with --mps on.",
    ),
    (
        "1F1B",
        "one forward, one backward: Megatron-core's pipeline schedule. Each stage runs a warm-up of forward passes, then alternates one forward and one backward micro-batch; each micro-batch's activation goes forward over every stage boundary and its gradient back.",
    ),
    (
        "dress rehearsal",
        "`nox -s rehearsal` (preset rehearsal): README's 4-GPU path with 4 ranks and real NCCL on the GPUs present (several ranks sharing a GPU where there are fewer than 4), or 4 gloo processes on a CPU, on tiny models with the fewest steps. It checks that the path runs (the functional checks), never the paper's numbers.",
    ),
    (
        "ranks per GPU",
        "`--ranks-per-gpu K`: K ranks, each a process of its own, share each GPU (rank r on GPU r // K; NCCL 2.30 or newer). Without MPS the processes take turns on the GPU (time-sliced); under an MPS daemon their kernels may run side by side.",
    ),
    (
        "functional check",
        "a check that the code path works rather than a measurement: under the rehearsal, that every rank wrote its numbers, that every collective ran, that each rank moved the bytes its ring collectives (or its pipeline's 1F1B sends and receives) should, and that the zero-byte controls moved nothing. It holds or fails.",
    ),
)


def markdown() -> str:
    """docs/glossary.md's body."""
    return "\n".join(f"- **{term}**: {meaning}" for term, meaning in GLOSSARY) + "\n"
