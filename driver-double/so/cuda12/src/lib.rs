//! The driver double as a loadable library for CUDA 12.x and 13.x drivers
//! (`libfc_cuda_double.so`): `cuGetProcAddress` and `cuGetProcAddress_v2`,
//! driver version 13000 unless `FC_DOUBLE_DRIVER_VERSION` says otherwise.

fc_driver_double::exports!(13000, with_v2);
