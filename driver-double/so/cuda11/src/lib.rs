//! The driver double as a loadable library for CUDA 11.x drivers
//! (`libfc_cuda_double_11.so`): `cuGetProcAddress` only, driver version
//! 11040 unless `FC_DOUBLE_DRIVER_VERSION` says otherwise.

fc_driver_double::exports!(11040, without_v2);
