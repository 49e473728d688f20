"""Tests of dlbook.detection: IoU by hand, NMS against brute force."""
import pytest
import torch

from dlbook import detection


def _random_boxes(n, seed):
    gen = torch.Generator().manual_seed(seed)
    corners = 10 * torch.rand(n, 2, generator=gen, dtype=torch.float64)
    sizes = 0.5 + 4 * torch.rand(n, 2, generator=gen, dtype=torch.float64)
    return torch.cat([corners, corners + sizes], dim=1), torch.rand(n, generator=gen, dtype=torch.float64)


def test_iou_by_hand():
    a = torch.tensor([[0.0, 0, 2, 2]])
    b = torch.tensor([[1.0, 1, 3, 3], [0, 0, 2, 2], [2, 0, 4, 2], [5, 5, 6, 6], [0, 0, 1, 1]])
    assert torch.allclose(detection.iou(a, b), torch.tensor([[1 / 7, 1, 0, 0, 1 / 4]]))
    assert detection.box_area(b).tolist() == [4, 4, 4, 1, 1]


def test_iou_is_symmetric_and_in_the_unit_interval():
    boxes, _ = _random_boxes(30, 0)
    overlaps = detection.iou(boxes, boxes)
    assert torch.equal(overlaps, overlaps.T)
    assert torch.allclose(overlaps.diagonal(), torch.ones(30, dtype=torch.float64))
    assert overlaps.min() >= 0 and overlaps.max() <= 1


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.9])
def test_nms_equals_brute_force(seed, threshold):
    boxes, scores = _random_boxes(60, seed)
    assert detection.nms(boxes, scores, threshold).tolist() == detection.nms_by_brute_force(boxes, scores, threshold)


def test_nms_keeps_the_best_of_a_cluster():
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0.5, 0, 10, 10.5]])
    scores = torch.tensor([0.8, 0.9, 0.7, 0.3])
    assert detection.nms(boxes, scores, 0.5).tolist() == [1, 2]
    assert detection.nms(boxes, scores, 1.0).tolist() == [1, 0, 2, 3]


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"shape \(N, 4\)"):
        detection.iou(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="x1 < x2"):
        detection.box_area(torch.tensor([[0.0, 0, 0, 1]]))
    with pytest.raises(ValueError, match="one entry per box"):
        detection.nms(torch.tensor([[0.0, 0, 1, 1]]), torch.tensor([0.5, 0.4]))
    with pytest.raises(ValueError, match="iou_threshold"):
        detection.nms(torch.tensor([[0.0, 0, 1, 1]]), torch.tensor([0.5]), 1.5)
