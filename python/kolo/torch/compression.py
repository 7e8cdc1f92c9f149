"""Gradient compression for allreduce, as horovod.torch.Compression: `none` passes tensors
through; `fp16` sends floating-point tensors as float16 (half the bytes, 11-bit precision)
and restores their dtype afterwards."""
import torch


class Compressor:
    @staticmethod
    def compress(tensor):
        """Returns (tensor to send, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.type(ctx)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
