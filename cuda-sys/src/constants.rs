//! Enum values and flags of the CUDA driver API, checked against `cuda.h`
//! of CUDA 12.9 and 13.0 by `tests/audit.rs`.

use crate::decl::ConstDecl;
use crate::types::*;

/// Declares constants grouped by type and records them in [`CONSTANTS`].
macro_rules! constants {
    ($( $ty:ident { $( $(#[$m:meta])* $name:ident = $value:expr ),* $(,)? } )*) => {
        $( $( $(#[$m])* #[doc = concat!("`", stringify!($name), "` of `cuda.h` (`", stringify!($ty), "`).")] pub const $name: $ty = $value; )* )*
        /// Every constant declared in this module, for the audit.
        pub const CONSTANTS: &[ConstDecl] = &[
            $( $( ConstDecl { name: stringify!($name), ty: stringify!($ty), value: $name as i128 } ),* ),*
        ];
    };
}

constants! {
    CUresult {
        CUDA_SUCCESS = 0,
        CUDA_ERROR_INVALID_VALUE = 1,
        CUDA_ERROR_OUT_OF_MEMORY = 2,
        CUDA_ERROR_NOT_INITIALIZED = 3,
        CUDA_ERROR_DEINITIALIZED = 4,
        CUDA_ERROR_NO_DEVICE = 100,
        CUDA_ERROR_INVALID_DEVICE = 101,
        CUDA_ERROR_INVALID_IMAGE = 200,
        CUDA_ERROR_INVALID_CONTEXT = 201,
        CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
        CUDA_ERROR_INVALID_PTX = 218,
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
        CUDA_ERROR_INVALID_HANDLE = 400,
        CUDA_ERROR_NOT_FOUND = 500,
        CUDA_ERROR_NOT_READY = 600,
        CUDA_ERROR_ILLEGAL_ADDRESS = 700,
        CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
        CUDA_ERROR_LAUNCH_FAILED = 719,
        CUDA_ERROR_NOT_SUPPORTED = 801,
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
        CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
        CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
        CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
        CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
        CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
        CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
        CUDA_ERROR_CAPTURED_EVENT = 907,
        CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
        CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
        CUDA_ERROR_UNKNOWN = 999,
    }
    CUstreamCaptureMode {
        CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
        CU_STREAM_CAPTURE_MODE_RELAXED = 2,
    }
    CUstreamCaptureStatus {
        CU_STREAM_CAPTURE_STATUS_NONE = 0,
        CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
        CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
    }
    CUstream_flags {
        CU_STREAM_DEFAULT = 0,
        CU_STREAM_NON_BLOCKING = 1,
    }
    CUevent_flags {
        CU_EVENT_DEFAULT = 0,
        CU_EVENT_BLOCKING_SYNC = 1,
        CU_EVENT_DISABLE_TIMING = 2,
    }
    CUctx_flags {
        CU_CTX_SCHED_AUTO = 0,
    }
    CUdevice_attribute {
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
        CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    }
    CUfunction_attribute {
        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    }
    CUpointer_attribute {
        CU_POINTER_ATTRIBUTE_CONTEXT = 1,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    }
    CUjit_option {
        CU_JIT_INFO_LOG_BUFFER = 3,
        CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
        CU_JIT_ERROR_LOG_BUFFER = 5,
        CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    }
    CUdriverProcAddress_flags {
        CU_GET_PROC_ADDRESS_DEFAULT = 0,
    }
    CUdriverProcAddressQueryResult {
        CU_GET_PROC_ADDRESS_SUCCESS = 0,
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
        CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
    }
    CUgraphExecUpdateResult {
        CU_GRAPH_EXEC_UPDATE_SUCCESS = 0,
        CU_GRAPH_EXEC_UPDATE_ERROR = 1,
        CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2,
    }
    CUlaunchAttributeID {
        /// An attribute slot the driver skips.
        CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
        /// Programmatic dependent launch: with
        /// `programmaticStreamSerializationAllowed = 1` the kernel may start
        /// before the previous kernel of the stream finishes, and must wait
        /// for it with `griddepcontrol.wait` before touching its results.
        CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    }
    CUgraphDependencyType {
        CU_GRAPH_DEPENDENCY_TYPE_DEFAULT = 0,
        /// The edge a captured programmatic launch leaves in a graph.
        CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1,
    }
    CUgraphDebugDot_flags {
        CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE = 1,
    }
    // `#define`s of `CUgraphEdgeData::from_port` values (an unsigned char).
    c_uchar {
        CU_GRAPH_KERNEL_NODE_PORT_DEFAULT = 0,
        CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC = 1,
        CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER = 2,
    }

    // --- green contexts (CUDA 12.4+) -------------------------------------
    CUgreenCtxCreate_flags {
        /// Required by `cuGreenCtxCreate`: the green context gets a default
        /// stream of its own.
        CU_GREEN_CTX_DEFAULT_STREAM = 1,
    }
    CUdevResourceType {
        CU_DEV_RESOURCE_TYPE_INVALID = 0,
        /// Streaming multiprocessors.
        CU_DEV_RESOURCE_TYPE_SM = 1,
    }
    // `#define RESOURCE_ABI_VERSION`: the `CUdevResource_v<N>` declared.
    c_int {
        RESOURCE_ABI_VERSION = 1,
    }

    // --- graph building
    CUgraphNodeType {
        CU_GRAPH_NODE_TYPE_KERNEL = 0,
        CU_GRAPH_NODE_TYPE_MEMCPY = 1,
        CU_GRAPH_NODE_TYPE_MEMSET = 2,
        CU_GRAPH_NODE_TYPE_HOST = 3,
        /// A child-graph node.
        CU_GRAPH_NODE_TYPE_GRAPH = 4,
        CU_GRAPH_NODE_TYPE_EMPTY = 5,
        CU_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
        CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
        CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL = 8,
        CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT = 9,
        CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
        CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
        CU_GRAPH_NODE_TYPE_BATCH_MEM_OP = 12,
        /// A conditional node (CUDA 12.3+): runs its body graphs if, while
        /// or as a switch on its condition's value.
        CU_GRAPH_NODE_TYPE_CONDITIONAL = 13,
    }
    // --- conditional nodes (CUDA 12.3+)
    CUgraphConditionalNodeType {
        /// Body 0 if the condition is non-zero (body 1, when `size` is 2, if it is zero).
        CU_GRAPH_COND_TYPE_IF = 0,
        /// Body 0 again and again while the condition is non-zero.
        CU_GRAPH_COND_TYPE_WHILE = 1,
        /// Body n once, n the condition's value (none when n >= `size`).
        CU_GRAPH_COND_TYPE_SWITCH = 2,
    }
    // A `#define` of `cuGraphConditionalHandleCreate`'s flags.
    c_uint {
        /// The condition is set to its default value at each launch of the graph.
        CU_GRAPH_COND_ASSIGN_DEFAULT = 1,
    }
    // --- the JIT linker
    CUjitInputType {
        CU_JIT_INPUT_CUBIN = 0,
        CU_JIT_INPUT_PTX = 1,
        CU_JIT_INPUT_FATBINARY = 2,
        CU_JIT_INPUT_OBJECT = 3,
        /// A static library of device code (`.a` of relocatable objects).
        CU_JIT_INPUT_LIBRARY = 4,
    }
}
