/* SPDX-License-Identifier: Apache-2.0 */
/* CMSIS device defines for the MPS2 AN500 (Cortex-M7 r0p0 + FPv5-D16 + MPU). */
#ifndef _SOC_MPS2_AN500_H_
#define _SOC_MPS2_AN500_H_

#define __MPU_PRESENT    1U
#define __FPU_PRESENT    1U
#define __ICACHE_PRESENT 1U
#define __DCACHE_PRESENT 1U
#define __DTCM_PRESENT   0U

#endif /* _SOC_MPS2_AN500_H_ */
