"""A results folder as the stages after `run` read it, loaded once (HTA's front object).

compare, validation and the report all take a `Results`: summary.csv, configs.json,
provenance.json and the status files, with verdicts.csv read when first asked for (compare
writes it; the report reads it). It judges nothing and imports no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from artifact.analyze.aggregate import gpus_in, load_summary
from artifact.core.emulated import EMULATED_SUFFIX, NOTE_PREFIX
from artifact.core.options import beyond_paper
from artifact.judge.verdicts import load_verdicts
from artifact.store import RunStore, check_derived


def is_proxy(parallelism) -> bool:
    """Whether a row's parallelism is a one-GPU proxy's (`proxy-copy`, `proxy-nccl-onerank`):
    the one test of it that compare, the controls and the results folder share."""
    return str(parallelism).startswith("proxy")


@dataclass
class Results:
    """What a results folder holds, for the stages that read it."""

    out: Path
    summary: pd.DataFrame
    configs: dict[str, dict]
    status: dict[str, dict]
    ran_on: dict  # provenance.json, written by summarize (aggregate.provenance_of)

    @classmethod
    def load(cls, out: Path) -> Results:
        out = Path(out)
        summary = load_summary(out)  # checks the folder and its summary first
        check_derived(out, ("summary.csv", "configs.json", "provenance.json"))
        return cls(
            out,
            summary,
            _json(out / "configs.json"),
            RunStore(out).status(),
            _json(out / "provenance.json"),
        )

    @cached_property
    def verdicts(self) -> pd.DataFrame:
        """verdicts.csv: compare judges, the report only reads (a missing or damaged one is
        an error)."""
        check_derived(self.out, ("verdicts.csv",))
        return load_verdicts(self.out)

    @cached_property
    def stopping(self) -> dict[tuple[str, str], dict]:
        """(figure, config id) -> the decision of each configuration run with --adaptive."""
        return RunStore(self.out).stopping()

    def records(self, figure: str) -> list[dict]:
        """One figure's records (V2 fits them per repetition)."""
        return [r for r in RunStore(self.out).records() if r["figure"] == figure]

    @property
    def gpus(self) -> list[str]:
        """The GPU models the rows ran on (none: a CPU run)."""
        return gpus_in(self.summary)

    @property
    def provenance(self) -> dict:
        return self.ran_on.get("provenance", {})

    def values(self) -> dict[str, list[str]]:
        """Every provenance key's values the run's records hold (VARYING_KEYS)."""
        return self.ran_on.get("values", {})

    def seen(self, key: str) -> list[str]:
        """Every value of a provenance key the run's records hold (VARYING_KEYS)."""
        return self.values().get(key, [])

    @property
    def rehearsal(self) -> bool:
        """A dress rehearsal (preset rehearsal): its checks are functional, never the paper's."""
        return "rehearsal" in self.seen("preset")

    @property
    def ranks_per_gpu(self) -> int:
        """The most ranks that shared one GPU in this run (1: one rank a GPU, or a CPU)."""
        return max((int(k) for k in self.seen("ranks_per_gpu")), default=1)

    @property
    def emulated_configs(self) -> list[str]:
        """Configurations run as rank 0 of W alone (--emulate-world): by their config, or
        by their summary note where configs.json lacks them."""
        by_config = {c for c, cfg in self.configs.items() if cfg.get("emulated_world")}
        notes = self.summary["note"].astype(str)  # NaN reads "nan"
        by_note = set(self.summary.loc[notes.str.startswith(NOTE_PREFIX), "config_id"])
        return sorted(by_config | by_note)

    def emulated_world(self, config_id: str) -> int | None:
        """W of a configuration run as rank 0 of W alone: its config's, else its id's
        `_e{W}` suffix; None for one run on real ranks."""
        if world := self.configs.get(config_id, {}).get("emulated_world"):
            return int(world)
        m = EMULATED_SUFFIX.search(str(config_id))
        return int(m.group(1)) if m else None

    @property
    def _beyond_paper_configs(self) -> set[str]:
        """Configurations of an implementation beyond the paper (torch FSDP2)."""
        return {c for c, cfg in self.configs.items() if beyond_paper(cfg)}

    @property
    def judged_rows(self) -> pd.DataFrame:
        """Rows of the paper's implementations on real ranks: not those of one beyond the
        paper (torch FSDP2 beside DeepSpeed ZeRO-3), which the report shows unjudged, nor
        emulated ones (preview_rows)."""
        left_out = self._beyond_paper_configs | set(self.emulated_configs)
        return self.summary[~self.summary["config_id"].isin(left_out)]

    @property
    def preview_rows(self) -> pd.DataFrame:
        """Emulated rows of the paper's implementations: shown beside the paper's numbers
        as a preview, never in its tally."""
        rows = self.summary[self.summary["config_id"].isin(self.emulated_configs)]
        return rows[~rows["config_id"].isin(self._beyond_paper_configs)]

    @property
    def paper_rows(self) -> pd.DataFrame:
        """The rows the paper's items are judged on: the paper's implementations, without
        the one-GPU proxies (judged apart as proxy evidence)."""
        rows = self.judged_rows
        return rows[~rows["parallelism"].map(is_proxy).astype(bool)]  # bool: an empty frame too

    @property
    def proxy_configs(self) -> list[str]:
        rows = self.judged_rows
        return sorted(set(rows.loc[rows["parallelism"].map(is_proxy).astype(bool), "config_id"]))


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}
