// The system OpenBLAS C interface (Debian: libopenblas-dev). Nothing of ours lives here.
#include <cblas.h>
