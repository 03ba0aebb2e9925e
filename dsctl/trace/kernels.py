"""The kernel classification table: which GPU kernels (and host ops) are communication, which are compute.

Each :class:`Family` is one regular expression (``re.search`` on the event name) with the class it gives, the
HTA-style category, the reason, and real kernel names it must match (tests check every example). Families are
tried in table order and the first match wins, so the local DeepEP kernels come before the broad
communication families. A name no family matches is compute (device) or nothing special (host).

Classes: ``comm`` moves data between ranks or synchronises them; ``compute`` is local work (including DeepEP's
local layout and mask kernels, which run on the communication stream but touch no peer memory); ``memory`` is a
local copy or memset (neither compute nor communication in the overlap figures).
"""

from __future__ import annotations

from dataclasses import dataclass

COMM, COMPUTE, MEMORY = "comm", "compute", "memory"
#: HTA's kernel categories, by class
CATEGORY = {COMM: "communication", COMPUTE: "computation", MEMORY: "memory"}

# DeepEP namespaces: v1 ``deep_ep::``, V2's ``deep_ep::legacy::``, DeepSeek's internal ``dpsk::ep::``
_EP = r"(?:deep_ep|dpsk::ep)(?:::legacy)?"


@dataclass(frozen=True)
class Family:
    """One row of the table: ``pattern`` (``re.search``), its class, and why."""

    name: str
    pattern: str
    cls: str
    reason: str
    examples: tuple[str, ...]

    @property
    def category(self) -> str:
        return CATEGORY[self.cls]


FAMILIES: tuple[Family, ...] = (
    Family("deepep-layout", _EP + r"::(?:cuda::|layout::)?get_dispatch_layout\b", COMPUTE,
           "reads topk_idx and writes per-rank/expert token counts into local memory; no peer pointers (it runs "
           "on the communication stream, so classify by name, not by stream)",
           ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int,"
            " int, int)",
            "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, "
            "int, int)")),
    Family("deepep-mask", _EP + r"::internode_ll::(?:query|update|clean)_mask_buffer\b", COMPUTE,
           "reads or writes the local mask of timed-out ranks; no peer traffic",
           ("void deep_ep::legacy::internode_ll::clean_mask_buffer<32>(int*, int)",)),
    Family("deepep-v2-epilogue", r"deep_ep::elastic::(?:dispatch_copy|combine_reduce)_epilogue_impl\b", COMPUTE,
           "V2 epilogues copy/reduce from already-received local buffers",
           ("void deep_ep::elastic::dispatch_copy_epilogue_impl<128>(void*)",)),
    Family("deepep-data", _EP + r"::(?:intranode|internode|internode_ll)::(?:dispatch|combine)\b", COMM,
           "all-to-all data movement: stores into peers' NVLink buffers (intranode), IBGDA puts + NVLink "
           "forwarding (internode), per-token IBGDA puts (low-latency); combine also reduces",
           ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, "
            "int4 const*, float const*, long const*, float const*, bool const*, int const*, int, int, int, int, "
            "int, int, void**, int, int, int, int)",
            "void deep_ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*)",
            "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*, "
            "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*)",
            "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, bool const*)",
            "void deep_ep::internode_ll::dispatch<true, false, 7168>(void*, float*, int*, long*)",
            "void deep_ep::legacy::internode_ll::combine<false, 7168, 9, 4>(void*, void*)")),
    Family("deepep-notify", _EP + r"::(?:intranode|internode|internode_ll)::(?:notify_dispatch|cached_notify"
           r"(?:_dispatch|_combine)?|barrier|clean_low_latency_buffer)\b", COMM,
           "synchronises ranks (barrier_block / nvshmem_sync / nvshmemx_barrier_all_block) and exchanges token "
           "counts with peers; the cached variants barrier and clean buffers: ranks wait for each other here",
           ("void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int const*, "
            "int const*, int*, void*, void**, int**, int, int, int)",
            "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int, int const*, int*)",
            "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int)",
            "void deep_ep::intranode::cached_notify_dispatch<8>(void**, int**, int, int, int)",
            "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int, int**, int, int)",
            "void deep_ep::intranode::barrier<8>(int**, int)",
            "void deep_ep::internode_ll::clean_low_latency_buffer<32>(int*, int, int*, int)")),
    Family("deepep-v2", r"deep_ep::elastic::(?:hybrid_)?(?:dispatch|combine|barrier|pp_send|pp_recv|engram_fetch"
           r"(?:_wait)?)_impl\b", COMM,
           "DeepEP V2 kernels that take ncclDevComm_t/ncclWindow_t and move data or wait through NCCL Gin",
           ("void deep_ep::elastic::dispatch_impl<false, 8>(ncclDevComm_t, ncclWindow_t)",
            "void deep_ep::elastic::hybrid_combine_impl<8>(ncclDevComm_t)",
            "void deep_ep::elastic::engram_fetch_wait_impl(ncclDevComm_t)")),
    Family("nccl", r"^(?:void )?nccl(?:Dev|Symk|SymkDev)?(?:Kernel|Func)_|^nccl:", COMM,
           "NCCL/RCCL collectives and send/recv: ncclKernel_* (<= 2.18), ncclDevKernel_* (>= 2.19), "
           "ncclSymkDevKernel_* (>= 2.27, symmetric memory), ncclDevFunc_*; nccl:* are the process group's "
           "annotations",
           ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs4K)",
            "ncclDevKernel_SendRecv(ncclDevKernelArgs4K)",
            "ncclDevKernel_Generic(ncclDevKernelArgs4K)",
            "ncclSymkDevKernel_AllGather_LL(ncclSymkDevWorkArgs4K)",
            "ncclDevFunc_AllGather_RING_LL", "nccl:all_to_all")),
    Family("msccl", r"^(?:void )?mscclKernel_", COMM, "MSCCL/RCCL schedule-driven collectives",
           ("mscclKernel_Sum_bfloat16_LL128", "mscclKernel_Sum_float_Simple_fullOps")),
    Family("nvshmem", r"_on_stream_kernel|^(?:void )?nvshmemi?_|nvshmemi_proxy|nvshmemi_signal_op_kernel", COMM,
           "NVSHMEM collectives, barriers and proxy/signal kernels on a stream",
           ("void barrier_on_stream_kernel_threadgroup<(threadgroup_t)3>(int, int, int, long*)",
            "void alltoall_on_stream_kernel<int>(int, void*, void const*, unsigned long)",
            "void nvshmemi_signal_op_kernel(unsigned long*, unsigned long, int, int)")),
    Family("torch-symm-mem", r"(?:^|::|\s)(?:multimem_(?:one_shot_)?(?:all_reduce|reduce|all_gather)"
           r"|one_shot_all_reduce|two_shot_all_reduce)_kernel\b|two_shot_all_reduce_kernel_inplace\b", COMM,
           "torch SymmetricMemory collectives (torch.ops.symm_mem.*, used by vLLM and SGLang for tensor parallelism): "
           "they load peers' buffers or multicast addresses and barrier on signal pads; source: pytorch "
           "torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu",
           ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned "
            "long, unsigned int**, unsigned long, unsigned long)",
            "void (anonymous namespace)::multimem_one_shot_all_reduce_kernel<float, 16>(float*, float*, unsigned "
            "long, unsigned int**, unsigned long, unsigned long)",
            "void (anonymous namespace)::multimem_all_gather_kernel<16>(char*, char*, unsigned long, unsigned int**, "
            "unsigned long, unsigned long)",
            "void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16**, "
            "c10::BFloat16*, c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned "
            "long)",
            "void (anonymous namespace)::two_shot_all_reduce_kernel<c10::BFloat16, 16, 8, false, false>("
            "c10::BFloat16**, c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, "
            "unsigned long, unsigned long)",
            "void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<float, 16, 4>(float**, unsigned long, "
            "unsigned long, unsigned int**, unsigned long, unsigned long)")),
    Family("custom-all-reduce", r"(?:^|::|\s)cross_device_reduce_(?:1|2)stage\b", COMM,
           "vLLM's custom all-reduce (csrc/custom_all_reduce.cuh) and SGLang's copy of it: reads peers' IPC "
           "buffers over NVLink and barriers on peers' signal flags",
           ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
            "vllm::Signal*, __nv_bfloat16*, int, int)",
            "void sglang::cross_device_reduce_2stage<half, 4>(sglang::RankData*, sglang::RankSignals, "
            "sglang::Signal*, half*, int, int)")),
    Family("userbuffers", r"userbuffers", COMM,
           "Transformer Engine userbuffers: tensor-parallel send/recv overlapped with GEMMs",
           ("void userbuffers_fp16_sum_inplace_gpu_rr_rs<8>(int, int, int, int, int, int, void**)",)),
    Family("p2p-copy", r"Memcpy PtoP|cudaMemcpyPeer|MemcpyPeer", COMM, "peer-to-peer copies over NVLink/PCIe",
           ("Memcpy PtoP (Device -> Device)",)),
    Family("host-collective", r"^c10d::|^gloo:|^record_param_comms$|^ProcessGroup", COMM,
           "host side of collectives: c10d ops, gloo's transfers (CPU-only runs), comms records",
           ("c10d::allreduce_", "gloo:all_reduce", "record_param_comms", "ProcessGroupNCCL::allreduce")),
    Family("ep-generic", r"(?:^|::|\s)(?:notify_|cached_notify_)?(?:dispatch|combine)\b", COMM,
           "other expert-parallel libraries that name their all-to-all kernels dispatch/combine in a namespace "
           "(not fused local kernels such as moe_dispatch_kernel_fused)",
           ("void uccl::ep::dispatch<8>(void*)", "combine")),
    Family("memory", r"^Memcpy|^Memset|^memcpy|^memset", MEMORY,
           "local copies and memsets (HTA's memory category): neither compute nor communication",
           ("Memcpy DtoD (Device -> Device)", "Memset (Device)", "Memcpy HtoD (Pageable -> Device)")),
)

#: the communication patterns of the table (what ``--comm-pattern`` replaces)
DEFAULT_COMM_PATTERNS: tuple[str, ...] = tuple(f.pattern for f in FAMILIES if f.cls == COMM)
