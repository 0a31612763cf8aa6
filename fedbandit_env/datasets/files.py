"""Where the data sets are: one folder, named by ``--data`` or the ``FEDBANDIT_DATA`` variable.

fedbandit never ships or downloads a data set. Put the files in one folder, laid out as

    $FEDBANDIT_DATA/diabetes-130-us/diabetic_data.csv.gz   (or diabetic_data.csv)

and either set ``FEDBANDIT_DATA`` to that folder or pass ``--data FOLDER`` to a reproduction
(docs/reproductions.md, "Data sets"). :func:`data_file` is the one resolver every loader, script
and test goes through.
"""

from __future__ import annotations

import os
from pathlib import Path

from fedbandit_env.errors import ConfigError

DATA_VAR = "FEDBANDIT_DATA"
# the UCI "Diabetes 130-US hospitals for years 1999-2008" file of the gossip paper's Fig. 2(c);
# the plain .csv is taken where the .gz is missing
DIABETES = "diabetes-130-us/diabetic_data.csv.gz"


def data_folder(data: str | os.PathLike | None = None) -> Path:
    """The data folder: ``data`` (a ``--data`` argument) if given, else ``$FEDBANDIT_DATA``.
    A clear :class:`ConfigError` naming the variable when neither names a folder."""
    where = data if data is not None else os.environ.get(DATA_VAR)
    if not where:
        raise ConfigError(
            f"data: no data folder; set {DATA_VAR} (or pass --data) to the folder that holds "
            f"the data sets, e.g. {DATA_VAR}=/path/to/data with {DIABETES} inside "
            "(nothing is downloaded)"
        )
    folder = Path(where).expanduser()
    if not folder.is_dir():
        source = "--data" if data is not None else DATA_VAR
        raise ConfigError(f"data: {source} = {str(where)!r} is not a folder")
    return folder


def data_file(relative: str, data: str | os.PathLike | None = None) -> Path:
    """The file ``relative`` (e.g. :data:`DIABETES`) inside the data folder (:func:`data_folder`);
    ``name.csv`` stands in for a missing ``name.csv.gz``. A :class:`ConfigError` names the
    variable and the expected path when it is missing."""
    folder = data_folder(data)
    path = folder / relative
    if path.is_file():
        return path
    if path.suffix == ".gz" and path.with_suffix("").is_file():
        return path.with_suffix("")
    raise ConfigError(
        f"data: expected {relative} in the data folder {folder} ({DATA_VAR} or --data), "
        f"not found at {path}"
    )


def find_data_file(relative: str, data: str | os.PathLike | None = None) -> Path | None:
    """:func:`data_file`, or ``None`` when no data folder is set or the file is not in it."""
    try:
        return data_file(relative, data)
    except ConfigError:
        return None
