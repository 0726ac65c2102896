# numpy/arrayobject.h: what fastq._native._core needs beyond Cython's numpy.pxd.
cimport numpy as cnp
from cpython.object cimport PyTypeObject

cdef extern from "numpy/arrayobject.h":
    # steals a reference to `descr`
    object PyArray_NewFromDescr(PyTypeObject *subtype, cnp.dtype descr, int nd, cnp.npy_intp *dims,
                                cnp.npy_intp *strides, void *data, int flags, object obj)
