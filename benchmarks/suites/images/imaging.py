"""Image operations of the kind an image library benchmarks: plain torch, written for this suite.

Shapes go from one small image (3x64x64) to a batch (8x3x256x256), so per-call times span about
10 us to 10 ms on a CPU core; every op is a function of a tensor so the suite can time it as is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SHAPES = {
    "3x64x64": (3, 64, 64),
    "3x128x128": (3, 128, 128),
    "3x256x256": (3, 256, 256),
    "8x3x256x256": (8, 3, 256, 256),
}
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def image(shape: str, dtype: str = "float32", seed: int = 0) -> torch.Tensor:
    """A reproducible image batch in [0, 1]."""
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(SHAPES[shape], generator=generator, dtype=DTYPES[dtype])


# -- colour ----------------------------------------------------------------------------------------


def rgb_to_grayscale(img: torch.Tensor) -> torch.Tensor:
    r, g, b = img.unbind(-3)
    return (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(-3)


def rgb_to_hsv(img: torch.Tensor) -> torch.Tensor:
    r, g, b = img.unbind(-3)
    maxc, _ = img.max(-3)
    minc, _ = img.min(-3)
    delta = maxc - minc
    v = maxc
    s = delta / (maxc + 1e-8)
    safe = torch.where(delta == 0, torch.ones_like(delta), delta)
    rc, gc, bc = (maxc - r) / safe, (maxc - g) / safe, (maxc - b) / safe
    h = torch.where(maxc == r, bc - gc, torch.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.fmod(h / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, v), dim=-3)


def hsv_to_rgb(img: torch.Tensor) -> torch.Tensor:
    h, s, v = img.unbind(-3)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int64) % 6
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    choices = torch.stack(
        (
            torch.stack((v, q, p, p, t, v), dim=-3),
            torch.stack((t, v, v, q, p, p), dim=-3),
            torch.stack((p, p, t, v, v, q), dim=-3),
        ),
        dim=-4,
    )
    index = i.unsqueeze(-3).unsqueeze(-4).expand(*choices.shape[:-3], 1, *i.shape[-2:])
    return choices.gather(-3, index).squeeze(-3)


_YUV = torch.tensor(
    [[0.299, 0.587, 0.114], [-0.14713, -0.28886, 0.436], [0.615, -0.51499, -0.10001]]
)


def rgb_to_yuv(img: torch.Tensor) -> torch.Tensor:
    return torch.einsum("ij,...jhw->...ihw", _YUV.to(img.dtype), img)


def adjust_brightness(img: torch.Tensor) -> torch.Tensor:
    return (img * 1.2).clamp_(0, 1)


def adjust_contrast(img: torch.Tensor) -> torch.Tensor:
    mean = rgb_to_grayscale(img).mean(dim=(-3, -2, -1), keepdim=True)
    return (1.5 * img + (1 - 1.5) * mean).clamp_(0, 1)


def normalize(img: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor([0.485, 0.456, 0.406], dtype=img.dtype).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], dtype=img.dtype).view(3, 1, 1)
    return (img - mean) / std


COLOUR = {
    f.__name__: f
    for f in (
        rgb_to_grayscale,
        rgb_to_hsv,
        hsv_to_rgb,
        rgb_to_yuv,
        adjust_brightness,
        adjust_contrast,
        normalize,
    )
}


# -- geometry --------------------------------------------------------------------------------------


def _batched(img: torch.Tensor) -> torch.Tensor:
    return img if img.dim() == 4 else img.unsqueeze(0)


def hflip(img: torch.Tensor) -> torch.Tensor:
    return img.flip(-1)


def rot90(img: torch.Tensor) -> torch.Tensor:
    return torch.rot90(img, 1, dims=(-2, -1)).contiguous()


def resize_bilinear(img: torch.Tensor) -> torch.Tensor:
    size = [s // 2 for s in img.shape[-2:]]
    return F.interpolate(
        _batched(img), size=size, mode="bilinear", align_corners=False, antialias=False
    )


def resize_nearest(img: torch.Tensor) -> torch.Tensor:
    size = [s * 3 // 4 for s in img.shape[-2:]]
    return F.interpolate(_batched(img), size=size, mode="nearest")


def center_crop_pad(img: torch.Tensor) -> torch.Tensor:
    h, w = img.shape[-2:]
    crop = img[..., h // 8 : h - h // 8, w // 8 : w - w // 8]
    return F.pad(crop, (h // 8, h // 8, w // 8, w // 8), mode="constant", value=0.0)


def rotate(img: torch.Tensor) -> torch.Tensor:
    batch = _batched(img)
    angle = torch.tensor(0.3, dtype=img.dtype)
    theta = torch.stack(
        (
            torch.stack((angle.cos(), -angle.sin(), torch.zeros((), dtype=img.dtype))),
            torch.stack((angle.sin(), angle.cos(), torch.zeros((), dtype=img.dtype))),
        )
    )
    grid = F.affine_grid(theta.expand(batch.shape[0], 2, 3), list(batch.shape), align_corners=False)
    return F.grid_sample(batch, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


GEOMETRY = {
    f.__name__: f for f in (hflip, rot90, resize_bilinear, resize_nearest, center_crop_pad, rotate)
}


# -- filters ---------------------------------------------------------------------------------------


def _gaussian_kernel(size: int, sigma: float, dtype: torch.dtype) -> torch.Tensor:
    x = torch.arange(size, dtype=dtype) - (size - 1) / 2
    k = torch.exp(-(x**2) / (2 * sigma**2))
    return k / k.sum()


def gaussian_blur(img: torch.Tensor, size: int = 5) -> torch.Tensor:
    batch = _batched(img)
    c = batch.shape[1]
    k = _gaussian_kernel(size, 1.0, img.dtype)
    kernel = (k[:, None] * k[None, :]).expand(c, 1, size, size)
    return F.conv2d(F.pad(batch, [size // 2] * 4, mode="reflect"), kernel, groups=c)


def box_blur(img: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(_batched(img), 3, stride=1, padding=1)


def sobel(img: torch.Tensor) -> torch.Tensor:
    gray = _batched(rgb_to_grayscale(img))
    kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]], dtype=img.dtype)
    kernel = torch.stack((kx, kx.t())).unsqueeze(1)
    grad = F.conv2d(gray, kernel, padding=1)
    return grad.pow(2).sum(1, keepdim=True).sqrt()


FILTERS = {
    "gaussian_blur3": lambda img: gaussian_blur(img, 3),
    "gaussian_blur7": lambda img: gaussian_blur(img, 7),
    "box_blur": box_blur,
    "sobel": sobel,
}


# -- random augmentations (a seeded generator, advanced by every call) -----------------------------


def random_crop(img: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    h, w = img.shape[-2:]
    top = int(torch.randint(0, h // 4, (1,), generator=generator))
    left = int(torch.randint(0, w // 4, (1,), generator=generator))
    return img[..., top : top + 3 * h // 4, left : left + 3 * w // 4].contiguous()


def random_flip(img: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    flip = torch.rand((), generator=generator) < 0.5
    return img.flip(-1) if bool(flip) else img.clone()


def color_jitter(img: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    b, c = 0.8 + 0.4 * torch.rand(2, generator=generator, dtype=img.dtype)
    out = (img * b).clamp(0, 1)
    mean = rgb_to_grayscale(out).mean(dim=(-3, -2, -1), keepdim=True)
    return (c * out + (1 - c) * mean).clamp(0, 1)


def random_erasing(img: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    h, w = img.shape[-2:]
    top = int(torch.randint(0, h // 2, (1,), generator=generator))
    left = int(torch.randint(0, w // 2, (1,), generator=generator))
    out = img.clone()
    out[..., top : top + h // 4, left : left + w // 4] = torch.rand(
        (*img.shape[:-2], h // 4, w // 4), generator=generator, dtype=img.dtype
    )
    return out


def gaussian_noise(img: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return (img + 0.05 * torch.randn(img.shape, generator=generator, dtype=img.dtype)).clamp(0, 1)


def mixup(img: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    lam = torch.rand((), generator=generator, dtype=img.dtype)
    return lam * img + (1 - lam) * img.flip(0)


AUGMENTATIONS = {
    f.__name__: f
    for f in (random_crop, random_flip, color_jitter, random_erasing, gaussian_noise, mixup)
}
