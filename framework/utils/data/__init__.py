"""Datasets, samplers and the DataLoader (`dualflow.utils.data`, as in PyTorch)."""
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .distributed import DistributedSampler
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler
from .worker import WorkerInfo, get_worker_info

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "BatchSampler", "DataLoader", "default_collate", "default_convert", "get_worker_info",
           "WorkerInfo"]
