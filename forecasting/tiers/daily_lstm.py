"""The ``daily`` tier: one global Keras LSTM on hourly data, 24 steps ahead.

Design (Salinas et al. 2020 "DeepAR" for the global-model idea,
Wen et al. 2017 "A Multi-Horizon Quantile Recurrent Forecaster" for direct
multi-horizon quantile outputs):

* what it learns is what the naive reference leaves over: inputs are the last
  168 hours' *mean* (:func:`forecasting.regularise.to_hourly`) as the change
  from the reference, the last 5-minute reading at the origin (what the naive
  peer forecasts, and what every forecast is scored against: 5-minute values,
  which an hour's peak overstates), divided by
  the window's scale (mean absolute hourly change, :meth:`DailyLSTM.window_scale`),
  so one global model reads the shape of a week whatever a pool's size; plus
  calendar features (:func:`forecasting.calendar.calendar_features`: hour of day,
  hour of week, holiday, make-up workday, day off, days to the next holiday) for
  those hours and for the 24 target hours; targets are the next 24 hours' mean
  minus the same reference;
* skip paths: the window's last day and its first (the same hours a week
  before the targets) go straight to the dense head beside the LSTM's state, so
  seasonal-naive at a day or a week is one linear map away; without them the
  network learnt little beyond the last value (docs/method.md, "Measured on the
  sample: the daily and weekly tiers");
* the LSTM steps through the 168 hours one *day* at a time (7 steps of 24
  hours x 9 features): the daily cycle is in every step's input, and the
  recurrence is 24x shorter than an hour-by-hour pass, which is what made
  training the cost of the three tiers (``python -m benchmarks tiers``);
* outputs: 24 x 4 quantiles (0.5, 0.9, 0.95, 0.99) of the next 24 hours' mean
  minus the last reading (same scale), trained with the pinball loss. Quantiles
  cannot cross: the head emits p50 and three non-negative increments (softplus);
* shrinkage toward naive (:func:`lead_shrinkage`; per lead, which beat one
  pooled correction and per-lead slopes without intercept on the same two weeks):
  per lead, the median change is corrected by the regression of realised on predicted changes over the
  held-out windows, slope clipped to [0, 1] (the bands keep their width around
  it), so a network without skill at a lead forecasts the last value (plus the
  median change from it) there;
* early stopping and the shrinkage on the time-ordered last 15 % of windows;
* deterministic on CPU for a fixed seed: ``keras.utils.set_random_seed`` and
  ``tf.config.experimental.enable_op_determinism``;
* prediction is one batched call over every (series, origin) pair.

Series shorter than 168 + 24 hours are not trained on and, at predict time,
without 168 hours of context they get the seasonal-naive fallback (stated).
An origin whose last 168 hours are constant (a fixed pool, all zero) gets
the last value (naive), stated: the network has nothing to read there.
TensorFlow is imported lazily, so importing this module is cheap.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from pydantic import Field

from forecasting.calendar import FEATURES, calendar_features
from forecasting.regularise import hourly_columns
from forecasting.tiers.base import Forecaster, TierSettings, series_values
from forecasting.tiers.naive import naive_quantiles
from forecasting.types import QUANTILES, SeriesMeta

# recorded with saved models; a model trained on another target is refitted
TARGET = "hour_mean_minus_last_reading_per_window_scale"
# recorded with saved models; a model of another architecture is refitted
ARCH = "lstm-day-steps-cal8-skip-day-week-shrunk-members"
LOOKBACK = 168
HORIZON = 24
N_CAL = len(FEATURES)
TARGET_CLIP = 50.0  # window-scaled changes beyond this are clipped in training (a few outliers)


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import keras
    import tensorflow as tf

    return tf, keras


def pinball_loss(y_true, y_pred):
    """Mean pinball (quantile) loss over the 4 quantile heads and the ensemble's members.

    ``y_true``: ``(batch, 24)``; ``y_pred``: ``(batch, 24, 4, members)``.
    Koenker & Bassett (1978): ``max(q * e, (q - 1) * e)`` with ``e = y - y_hat``.
    The mean over members is the sum of each member's own loss (scaled): the
    members share no weights, so each is trained as if alone.
    """
    tf, _ = _tf()
    q = tf.reshape(tf.constant(QUANTILES, dtype=y_pred.dtype), (len(QUANTILES), 1))
    e = y_true[:, :, None, None] - y_pred
    return tf.reduce_mean(tf.maximum(q * e, (q - 1.0) * e))


def lead_shrinkage(pred: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Per lead, the correction ``(a, b)`` of the predicted median change: ``a + b * pred``.

    ``pred``, ``actual``: ``(windows, 24)`` predicted and realised changes from the
    last value (window-scaled) on held-out windows. The Mincer–Zarnowitz regression
    (Mincer & Zarnowitz 1969) of realised on predicted, with ``b`` clipped to [0, 1]
    and ``a`` the median residual at that ``b``: ``b`` = 0 where the network's changes
    carry no information (the forecast is then the last value plus the mean change
    from it, e.g. from an hour's maximum to the next hours), 1 where they are worth
    their full size. Returns a ``(24, 2)`` array of ``(a, b)``.
    """
    pm, am = pred.mean(axis=0), actual.mean(axis=0)
    pc, ac = pred - pm, actual - am
    den = (pc * pc).sum(axis=0)
    b = np.clip(np.divide((pc * ac).sum(axis=0), den, out=np.zeros_like(den, dtype="float64"), where=den > 0), 0, 1)
    a = np.median(actual - b * pred, axis=0)  # the median: MASE and the p50's pinball loss are absolute errors
    return np.column_stack([a, b])


def even_subsample(n: int, k: int) -> np.ndarray:
    """``k`` of the positions ``0 .. n - 1``, evenly spaced (sorted, distinct; all ``n`` when
    ``k >= n``). The training windows are stacked series by series in time order, so every
    series and every stretch of its history keeps its share. Not drawn with the seed: which
    windows the network learns from is a property of the data, and a random draw made the
    forecasts of pools with few bursts move with the seed (an idle pool's busy hours are in
    some draws and not in others)."""
    if k >= n:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(int))


_LAYER = None


def _monotone_layer():
    """The output layer: p50 plus cumulative softplus increments, so quantiles never cross.

    A registered Keras layer (not a ``Lambda``), so ``.keras`` files load in
    Keras' safe mode with no Python bytecode deserialised.
    """
    global _LAYER
    if _LAYER is None:
        _, keras = _tf()

        @keras.saving.register_keras_serializable(package="capplan")
        class MonotoneQuantiles(keras.layers.Layer):
            def call(self, raw):
                base = raw[..., :1]
                inc = keras.ops.softplus(raw[..., 1:])
                return keras.ops.concatenate([base, base + keras.ops.cumsum(inc, axis=-1)], axis=-1)

        _LAYER = MonotoneQuantiles
    return _LAYER


def _build_model(units: int, seed: int, members: int = 1):
    """The network: ``members`` independent copies (their own initial weights; seeds
    ``seed``, ``seed + 1``, ...) of the LSTM and its head, on the same inputs, side by
    side in one graph. Output ``(batch, 24, 4, members)``; the forecast is their mean
    (a deep ensemble, Lakshminarayanan, Pritzel & Blundell 2017, averaged quantile by
    quantile as in Lichtendahl et al. 2013)."""
    tf, keras = _tf()
    seq = keras.Input(shape=(LOOKBACK, 1 + N_CAL), name="history")
    fut = keras.Input(shape=(HORIZON * N_CAL,), name="future_calendar")
    days = keras.layers.Reshape((LOOKBACK // 24, 24 * (1 + N_CAL)), name="day_steps")(seq)
    # skip paths: the last day and the same day a week earlier, hour by hour, straight to the
    # head (seasonal-naive at one day and one week is then one linear map away)
    last_day = keras.layers.Flatten()(keras.layers.Cropping1D((LOOKBACK - 24, 0))(seq))
    week_ago = keras.layers.Flatten()(keras.layers.Cropping1D((0, LOOKBACK - 24))(seq))
    outs = []
    for k in range(members):
        h = keras.layers.LSTM(units, seed=seed + k)(days)
        z = keras.layers.Concatenate()([h, fut, last_day, week_ago])
        z = keras.layers.Dense(64, activation="relu")(z)
        raw = keras.layers.Dense(HORIZON * len(QUANTILES))(z)
        raw = keras.layers.Reshape((HORIZON, len(QUANTILES)))(raw)
        q = _monotone_layer()(name=f"quantiles_{k}")(raw)
        outs.append(keras.layers.Reshape((HORIZON, len(QUANTILES), 1))(q))
    out = outs[0] if members == 1 else keras.layers.Concatenate(axis=-1, name="members")(outs)
    model = keras.Model([seq, fut], out)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=pinball_loss, jit_compile=False, steps_per_execution=8)
    return model


class LSTMSettings(TierSettings):
    """The LSTM's options from the ``forecast:`` section."""

    epochs: int = Field(default=20, alias="lstm_epochs", ge=1, le=1000, description="training epochs of the daily "
                        "tier's LSTM (at most; early stopping may end sooner)")
    units: int = Field(default=32, alias="lstm_units", ge=1, le=1024, description="LSTM units of the daily tier's "
                       "network")
    max_windows: int = Field(default=2000, alias="lstm_max_windows", ge=16, le=1_000_000, description="training "
                             "windows the LSTM sees per fit at most (an even subsample of them when there are more)")
    members: int = Field(default=5, alias="lstm_members", ge=1, le=16, description="networks in the daily tier's "
                         "ensemble, each from its own seed; the forecast is their mean, quantile by quantile, so the "
                         "seed moves it less (about 1/sqrt(members) of one network's spread) at members x the "
                         "training cost")


class DailyLSTM(Forecaster):
    """Global LSTM tier (see module docstring).

    Options: ``epochs``, ``units``, ``max_windows`` (an even subsample when there are more: :func:`even_subsample`)
    and ``members`` (networks in the ensemble, :func:`_build_model`), with the defaults of :class:`LSTMSettings`;
    ``batch_size`` (256) and ``patience`` (3), which the configuration does not set.
    """

    step = "1h"
    horizon = HORIZON
    min_history = LOOKBACK + HORIZON
    refit_every = "7D"  # backtests: one global retrain per week of origins
    per_series = False  # one global model
    settings = LSTMSettings
    arch = f"{ARCH}/{TARGET}"
    fit_options = ("seed", "epochs", "units", "batch_size", "max_windows", "patience", "members")

    def __init__(self, seed: int = 0, epochs: int | None = None, units: int | None = None, batch_size: int = 256,
                 max_windows: int | None = None, patience: int = 3, members: int | None = None, **options):
        super().__init__(seed=seed, **options)
        epochs, units, max_windows, members = (LSTMSettings.default(k, v) for k, v in
                                               (("epochs", epochs), ("units", units),
                                                ("max_windows", max_windows), ("members", members)))
        self.epochs, self.units, self.batch_size, self.members = epochs, units, batch_size, members
        self.max_windows, self.patience = max_windows, patience
        self.shrink = np.column_stack([np.zeros(HORIZON), np.ones(HORIZON)])  # per lead (a, b): a + b * median change
        self.tz: dict[str, str] = {}
        self.model = None
        self.trained: list[str] = []  # series with training windows
        self.history_loss: list[float] = []

    # -- data ------------------------------------------------------------------
    @staticmethod
    def window_scale(w: np.ndarray) -> float:
        """Scale of one input window (GPUs): the mean absolute hourly change, at least
        1 % of the window's largest value (and 0.01). Inputs and targets are divided by
        it, so the global model sees the shape of a week, not its level or size."""
        d = np.abs(np.diff(w))
        return float(max(d.mean() if len(d) else 0.0, 0.01 * float(np.abs(w).max()), 0.01))

    def _windows(self, s: pd.Series, ref: pd.Series, tz: str, ends: np.ndarray, with_target: bool):
        """Input windows ending at positions ``ends`` (inclusive): the hourly level ``s``
        (the hour's mean) minus the reference (``ref``: the last 5-minute reading at the
        window's end) over the window's scale, with calendar features; targets are the
        next 24 hours' level minus the same reference, over the same scale.
        Returns ``(x, f, y, last, scale)`` (``y`` None without targets; ``last`` the reference)."""
        v = s.ffill().bfill().fillna(0.0).to_numpy(dtype="float64")
        r = ref.ffill().bfill().fillna(0.0).to_numpy(dtype="float64")
        raw = s.to_numpy(dtype="float64")
        step = pd.Timedelta("1h")
        fut_idx = pd.date_range(s.index[-1] + step, periods=HORIZON, freq=step)
        cal = calendar_features(s.index.append(fut_idx), tz)
        xs, fs, ys, lasts, scales = [], [], [], [], []
        for e in ends:
            lo = e - LOOKBACK + 1
            w = v[lo:e + 1]
            sc = self.window_scale(w)
            xs.append(np.column_stack([(w - r[e]) / sc, cal[lo:e + 1]]))
            fs.append(cal[e + 1:e + 1 + HORIZON].ravel())
            lasts.append(r[e])
            scales.append(sc)
            if with_target:
                ys.append(np.clip((raw[e + 1:e + 1 + HORIZON] - r[e]) / sc, -TARGET_CLIP, TARGET_CLIP))
        x = np.asarray(xs, dtype="float32")
        f = np.asarray(fs, dtype="float32")
        y = np.asarray(ys, dtype="float32") if with_target else None
        return x, f, y, np.asarray(lasts), np.asarray(scales)

    def fit(self, history: pd.DataFrame, meta: dict[str, SeriesMeta]) -> "DailyLSTM":
        """Train the global model on every series with enough history, then learn the
        per-lead shrinkage toward the last value on the held-out (latest) windows."""
        tf, keras = _tf()
        keras.utils.set_random_seed(self.seed)
        tf.config.experimental.enable_op_determinism()
        parts = {"x": [], "f": [], "y": [], "vx": [], "vf": [], "vy": []}
        self._note_range(history)
        self.trained = []
        lev_col, ref_col = hourly_columns(history)
        for sid in history["series_id"].unique():
            s = series_values(history, sid, lev_col)
            self.tz[sid] = meta.get(sid, SeriesMeta()).timezone
            if s.notna().sum() < self.min_history:
                continue
            ends = np.arange(LOOKBACK - 1, len(s) - HORIZON)
            x, f, y, _, _ = self._windows(s, series_values(history, sid, ref_col), self.tz[sid], ends, True)
            # windows with a missing target or a constant input week (forecast as naive, see predict)
            ok = ~np.isnan(y).any(axis=1) & (np.abs(x[:, :, 0]).max(axis=1) > 0)
            x, f, y = x[ok], f[ok], y[ok]
            if len(x):
                self.trained.append(sid)
            n_val = int(round(0.15 * len(x)))  # the last windows in time: early stopping and shrinkage
            cut = len(x) - n_val
            for k, a in (("x", x), ("f", f), ("y", y)):
                parts[k].append(a[:cut])
                parts["v" + k].append(a[cut:])
        n_train = sum(len(a) for a in parts["x"])
        if n_train < 16:
            self.model, self.trained = None, []
            return self
        x, f, y, vx, vf, vy = (np.concatenate(parts[k]) for k in ("x", "f", "y", "vx", "vf", "vy"))
        if len(x) > self.max_windows:
            keep = even_subsample(len(x), self.max_windows)
            x, f, y = x[keep], f[keep], y[keep]
        self.model = _build_model(self.units, self.seed, self.members)
        cb = keras.callbacks.EarlyStopping(monitor="val_loss", patience=self.patience, restore_best_weights=True)
        val = ([vx, vf], vy) if len(vx) else None
        hist = self.model.fit([x, f], y, validation_data=val, epochs=self.epochs, batch_size=self.batch_size,
                              shuffle=True, verbose=0, callbacks=[cb] if val else [])
        self.history_loss = [float(v) for v in hist.history.get("val_loss", [])]
        self.shrink = np.column_stack([np.zeros(HORIZON), np.ones(HORIZON)])
        if len(vx):
            p50 = self.model.predict([vx, vf], batch_size=512, verbose=0).mean(axis=-1)[:, :, 0]
            self.shrink = lead_shrinkage(p50, vy)
        return self

    def predict(self, history, origins=None):
        """Quantiles at every origin in one batched ``model.predict`` call (no per-step
        calls, which would retrace). Windows are built once per series and sliced per
        origin. Origins without a model, without 168 hours of context, or with a
        constant last week get a stated naive or seasonal-naive fallback."""
        frames, batch_x, batch_f, keys = [], [], [], []
        lev_col, ref_col = hourly_columns(history)
        for sid, ors in self._origins(history, origins).items():
            s = series_values(history, sid, lev_col)
            refs = series_values(history, sid, ref_col)
            raw = s.to_numpy(dtype="float64")
            present = s.notna().to_numpy()
            for o in ors:
                e = int(s.index.searchsorted(o, side="right")) - 1  # last position <= origin
                ctx = refs.iloc[: e + 1]  # the fallbacks' history: the hours' last readings
                enough = (self.model is not None and e >= LOOKBACK - 1
                          and present[e - LOOKBACK + 1:e + 1].sum() >= LOOKBACK // 2)
                week = raw[e - LOOKBACK + 1:e + 1]
                if e >= LOOKBACK - 1 and np.isfinite(week).any() and np.nanmax(week) == np.nanmin(week):
                    # a constant week (a fixed pool, all zero): nothing for the network to read,
                    # and its output would be noise around the level; the level is the forecast
                    self.fallbacks.setdefault(sid, f"daily: the last {LOOKBACK} hours are constant; "
                                                   "naive (last value) used")
                    frames.append(self._frame(sid, o, naive_quantiles(ctx.to_numpy(), HORIZON)))
                    continue
                if not enough:
                    if self.model is None:
                        self.fallbacks.setdefault(sid, "daily: too little hourly history to train the LSTM; "
                                                       "seasonal-naive used")
                    else:
                        self.fallbacks.setdefault(sid, f"daily: {int(ctx.notna().sum())} hours of context < "
                                                       f"{LOOKBACK} needed; seasonal-naive used")
                    frames.append(self._frame(sid, o, naive_quantiles(ctx.to_numpy(), HORIZON, season=24)))
                    continue
                keys.append((sid, o, e))
        by_sid: dict[str, list] = {}
        for sid, o, e in keys:
            by_sid.setdefault(sid, []).append((o, e))
        meta_rows = []
        for sid, items in by_sid.items():
            x, f, _, last, sc = self._windows(series_values(history, sid, lev_col),
                                              series_values(history, sid, ref_col), self.tz.get(sid, "UTC"),
                                              np.array([e for _, e in items]), False)
            batch_x.append(x)
            batch_f.append(f)
            meta_rows += [(sid, o, la, c) for (o, _), la, c in zip(items, last, sc)]
        if meta_rows:
            pred = self.model.predict([np.concatenate(batch_x), np.concatenate(batch_f)], batch_size=512,
                                     verbose=0).mean(axis=-1)  # the members' mean, quantile by quantile
            shrink = np.asarray(self.shrink, dtype="float64")
            for (sid, o, last, sc), q in zip(meta_rows, pred):
                q = np.asarray(q, dtype="float64")
                q = q - q[:, :1] + (shrink[:, 0] + shrink[:, 1] * q[:, 0])[:, None]  # corrected median, same bands
                frames.append(self._frame(sid, o, last + q * sc))
        return self._concat(frames)

    # persistence (Forecaster.save / load): .keras (safe mode) + JSON state ---------------
    def fitted_series(self) -> list[str]:
        return sorted(self.trained) if self.model is not None else []

    def _state(self, series: list[str]) -> dict:
        return {"shrink": np.asarray(self.shrink, dtype="float64").tolist(), "tz": self.tz,
                "trained": sorted(self.trained), "has_model": self.model is not None}

    def _write_files(self, directory, series) -> None:
        if self.model is not None:
            self.model.save(str(directory / "model.keras"))

    def _restore(self, state: dict, directory) -> None:
        """Load ``model.keras`` in Keras' safe mode (known custom objects only, no bytecode).
        Nothing changes on this forecaster unless everything loads. A model fitted with other
        options (``units``, ``members``, ``epochs`` ...) or another seed is refused before this,
        by :meth:`Forecaster.load` (:attr:`fit_options`)."""
        shrink = np.asarray(state["shrink"], dtype="float64")
        if shrink.shape != (HORIZON, 2):
            raise ValueError(f"shrink has shape {shrink.shape}, expected ({HORIZON}, 2)")
        tz, trained = dict(state["tz"]), list(state["trained"])
        model = None
        if state["has_model"]:
            _, keras = _tf()
            _monotone_layer()
            model = keras.saving.load_model(str(directory / "model.keras"),
                                            custom_objects={"pinball_loss": pinball_loss}, safe_mode=True)
        self.shrink, self.tz, self.trained, self.model = shrink, tz, trained, model
