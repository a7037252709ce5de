#include "kernels/linear_kernels.hpp"
