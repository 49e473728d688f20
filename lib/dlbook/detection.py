"""Two building blocks of object detectors: intersection over union and non-maximum suppression (Chapter 5).

Boxes are rows (x1, y1, x2, y2) with x1 < x2 and y1 < y2. A detector proposes
many overlapping boxes with scores; non-maximum suppression keeps the best
box, drops every remaining box that overlaps it by more than a threshold, and
repeats. :func:`nms` computes all overlaps at once and keeps the greedy loop
over boxes (each decision depends on the previous ones);
:func:`nms_by_brute_force` recomputes each overlap from the coordinates, in
plain Python, as the readable reference.
"""
from __future__ import annotations

import torch

from .validation import as_tensor, check_float, describe


def _boxes(name: str, boxes) -> torch.Tensor:
    boxes = as_tensor(name, boxes, ndim=2, floating=True)
    if boxes.shape[1] != 4:
        raise ValueError(f"{name} must have shape (N, 4) with rows (x1, y1, x2, y2), got {describe(boxes)}")
    if not bool(((boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])).all()):
        raise ValueError(f"{name} must have x1 < x2 and y1 < y2 in every row")
    return boxes


def box_area(boxes) -> torch.Tensor:
    """(x2 - x1)(y2 - y1) for each row (Chapter 5)."""
    boxes = _boxes("boxes", boxes)
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def iou(boxes_a, boxes_b) -> torch.Tensor:
    """Intersection over union of every pair: an (N, M) matrix with entries in [0, 1] (Chapter 5)."""
    boxes_a, boxes_b = _boxes("boxes_a", boxes_a), _boxes("boxes_b", boxes_b)
    top_left = torch.maximum(boxes_a[:, None, :2], boxes_b[None, :, :2])          # (N, M, 2)
    bottom_right = torch.minimum(boxes_a[:, None, 2:], boxes_b[None, :, 2:])      # (N, M, 2)
    intersection = (bottom_right - top_left).clamp(min=0).prod(dim=-1)
    union = box_area(boxes_a)[:, None] + box_area(boxes_b)[None, :] - intersection
    return intersection / union


def _scores(boxes: torch.Tensor, scores) -> torch.Tensor:
    scores = as_tensor("scores", scores, ndim=1, floating=True)
    if len(scores) != len(boxes):
        raise ValueError(f"scores must have one entry per box ({len(boxes)}), got {len(scores)}")
    return scores


def nms(boxes, scores, iou_threshold: float = 0.5) -> torch.Tensor:
    """Indices of the boxes greedy non-maximum suppression keeps, best score first (Chapter 5).

    A box is dropped when its IoU with an already kept, higher-scoring box exceeds ``iou_threshold``.
    """
    boxes = _boxes("boxes", boxes)
    scores = _scores(boxes, scores)
    iou_threshold = check_float("iou_threshold", iou_threshold, low=0.0, high=1.0)
    order = torch.argsort(scores, descending=True, stable=True)
    overlaps = iou(boxes, boxes)
    suppressed = torch.zeros(len(boxes), dtype=torch.bool, device=boxes.device)
    keep = []
    for index in order.tolist():
        if suppressed[index]:
            continue
        keep.append(index)
        suppressed |= overlaps[index] > iou_threshold
    return torch.tensor(keep, dtype=torch.long, device=boxes.device)


def nms_by_brute_force(boxes, scores, iou_threshold: float = 0.5) -> list[int]:
    """:func:`nms` in plain Python: each overlap recomputed from the four coordinates (reference)."""
    boxes = _boxes("boxes", boxes).tolist()
    scores = _scores(torch.tensor(boxes), scores).tolist()
    iou_threshold = check_float("iou_threshold", iou_threshold, low=0.0, high=1.0)

    def overlap(a, b):
        width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = width * height
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)

    order = sorted(range(len(boxes)), key=lambda i: -scores[i])      # sorted() is stable, like argsort(stable=True)
    keep: list[int] = []
    for i in order:
        if all(overlap(boxes[i], boxes[j]) <= iou_threshold for j in keep):
            keep.append(i)
    return keep
