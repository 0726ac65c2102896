/* fq_num.c - the element types of the image task's extra outputs (enum fq_num_type in
 * fq_imgtask.h): byte sizes and names.  Pure functions of constant tables: thread-safe. */
#include "task/fq_imgtask.h"

size_t fq_num_size(int type)
{
    static const size_t size[FQ_NUM_COUNT] = {0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    return type > 0 && type < FQ_NUM_COUNT ? size[type] : 0;
}

const char *fq_num_name(int type)
{
    static const char *const name[FQ_NUM_COUNT] = {"",       "int8",   "int16",  "int32",   "int64",  "uint8",
                                                   "uint16", "uint32", "uint64", "float32", "float64"};
    return type > 0 && type < FQ_NUM_COUNT ? name[type] : "";
}
