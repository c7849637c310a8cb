/* Hand-written C of the robot programs of bench_robot.py (float32, plain loops, no BLAS):
 * the attitude EKF step of examples/ekf_attitude.py, the DLS IK step of examples/arm_ik.py
 * (its 6x6 system by Cholesky, as the example's solve(assume_a="pos"))
 * and an LQR step x' = A x + B u, u = -K x. bench_robot.py builds this file as a shared
 * library with -O3 and with -O3 -ffast-math -march=native, calls each step once per step
 * through ctypes and times it in C (time_* below: REPS calls in a loop, seconds per call). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Solves a x = b (n <= 8, one right-hand side column per m) by Gaussian elimination with
 * partial pivoting; a and b are overwritten (b holds x). */
static void solve(int n, int m, float a[8][8], float b[8][8])
{
    for (int k = 0; k < n; k++) {
        int p = k;
        for (int r = k + 1; r < n; r++)
            if (fabsf(a[r][k]) > fabsf(a[p][k])) p = r;
        if (p != k) {
            for (int c = 0; c < n; c++) { float t = a[k][c]; a[k][c] = a[p][c]; a[p][c] = t; }
            for (int c = 0; c < m; c++) { float t = b[k][c]; b[k][c] = b[p][c]; b[p][c] = t; }
        }
        for (int r = k + 1; r < n; r++) {
            float f = a[r][k] / a[k][k];
            for (int c = k; c < n; c++) a[r][c] -= f * a[k][c];
            for (int c = 0; c < m; c++) b[r][c] -= f * b[k][c];
        }
    }
    for (int k = n - 1; k >= 0; k--)
        for (int c = 0; c < m; c++) {
            float s = b[k][c];
            for (int j = k + 1; j < n; j++) s -= a[k][j] * b[j][c];
            b[k][c] = s / a[k][k];
        }
}

/* Solves a x = b for a symmetric positive definite a (n <= 8, its lower triangle read) by
 * Cholesky, L y = b, L^T x = y, as cp.linalg.solve(assume_a="pos"); b holds x. */
static void solve_pos(int n, float a[8][8], float *b)
{
    float low[8][8];
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            float t = a[i][j];
            for (int m = 0; m < j; m++) t -= low[i][m] * low[j][m];
            low[i][j] = i == j ? sqrtf(t) : t / low[j][j];
        }
    for (int i = 0; i < n; i++) {
        float t = b[i];
        for (int j = 0; j < i; j++) t -= low[i][j] * b[j];
        b[i] = t / low[i][i];
    }
    for (int i = n - 1; i >= 0; i--) {
        float t = b[i];
        for (int j = i + 1; j < n; j++) t -= low[j][i] * b[j];
        b[i] = t / low[i][i];
    }
}

/* ---- attitude EKF (examples/ekf_attitude.py) ---- */
#define Q_RATE 1e-5f
#define R_ACC (0.05f * 0.05f)

void ekf_step(const float *q, const float *P, const float *gyro, const float *acc, float dt,
              float *q_out, float *P_out)
{
    const float w = q[0], x = q[1], y = q[2], z = q[3];
    const float p = gyro[0], r = gyro[1], s = gyro[2], h = 0.5f * dt;
    float qp[4] = {w + h * (-x * p - y * r - z * s), x + h * (w * p + y * s - z * r),
                   y + h * (w * r - x * s + z * p), z + h * (w * s + x * r - y * p)};
    float F[4][4] = {{1.0f, -h * p, -h * r, -h * s}, {h * p, 1.0f, h * s, -h * r},
                     {h * r, -h * s, 1.0f, h * p}, {h * s, h * r, -h * p, 1.0f}};
    float FP[4][4], Pp[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float t = 0.0f;
            for (int k = 0; k < 4; k++) t += F[i][k] * P[k * 4 + j];
            FP[i][j] = t;
        }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float t = 0.0f;
            for (int k = 0; k < 4; k++) t += FP[i][k] * F[j][k];
            Pp[i][j] = t + (i == j ? Q_RATE * dt : 0.0f);
        }
    const float W = qp[0], X = qp[1], Y = qp[2], Z = qp[3];
    const float hv[3] = {2.0f * (X * Z - W * Y), 2.0f * (Y * Z + W * X),
                         W * W - X * X - Y * Y + Z * Z};
    const float H[3][4] = {{-2.0f * Y, 2.0f * Z, -2.0f * W, 2.0f * X},
                           {2.0f * X, 2.0f * W, 2.0f * Z, 2.0f * Y},
                           {2.0f * W, -2.0f * X, -2.0f * Y, 2.0f * Z}};
    float S[8][8], HP[8][8];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            float t = 0.0f;
            for (int k = 0; k < 4; k++) t += H[i][k] * Pp[k][j];
            HP[i][j] = t;
        }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            float t = 0.0f;
            for (int k = 0; k < 4; k++) t += HP[i][k] * H[j][k];
            S[i][j] = t + (i == j ? R_ACC : 0.0f);
        }
    solve(3, 4, S, HP); /* HP := S^-1 H P = K^T */
    const float an = sqrtf(acc[0] * acc[0] + acc[1] * acc[1] + acc[2] * acc[2]);
    float innov[3];
    for (int i = 0; i < 3; i++) innov[i] = acc[i] / an - hv[i];
    float qn[4], norm = 0.0f;
    for (int i = 0; i < 4; i++) {
        float t = qp[i];
        for (int k = 0; k < 3; k++) t += HP[k][i] * innov[k];
        qn[i] = t;
        norm += t * t;
    }
    norm = sqrtf(norm);
    for (int i = 0; i < 4; i++) q_out[i] = qn[i] / norm;
    float Pn[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float t = 0.0f;
            for (int k = 0; k < 4; k++) {
                float ikh = (i == k ? 1.0f : 0.0f);
                for (int l = 0; l < 3; l++) ikh -= HP[l][i] * H[l][k];
                t += ikh * Pp[k][j];
            }
            Pn[i][j] = t;
        }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) P_out[i * 4 + j] = (Pn[i][j] + Pn[j][i]) * 0.5f;
}

double time_ekf(long reps, const float *q, const float *P, const float *gyro, const float *acc,
                float dt, float *q_out, float *P_out)
{
    double t0 = now();
    for (long i = 0; i < reps; i++) {
        __asm__ volatile("" : : "r"(q), "r"(P), "r"(gyro), "r"(acc) : "memory");
        ekf_step(q, P, gyro, acc, dt, q_out, P_out);
    }
    return (now() - t0) / (double)reps;
}

/* ---- 6-DOF arm, one damped least squares IK step (examples/arm_ik.py) ---- */
static const float DH_D[6] = {0.089159f, 0.0f, 0.0f, 0.10915f, 0.09465f, 0.0823f};
static const float DH_A[6] = {0.0f, -0.425f, -0.39225f, 0.0f, 0.0f, 0.0f};
static const float COS_ALPHA[6] = {0.0f, 1.0f, 1.0f, 0.0f, 0.0f, 1.0f};
static const float SIN_ALPHA[6] = {1.0f, 0.0f, 0.0f, 1.0f, -1.0f, 0.0f};
#define DAMPING 0.05f

static void cross(const float *a, const float *b, float *out)
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* One DLS step; lu: the 6x6 system by LU with partial pivoting instead of Cholesky (the
 * example's assume_a="gen") */
static inline void ik(const float *q, const float *p_target, const float *r_target,
                      float *q_out, int lu)
{
    float T[7][4][4]; /* T[0] = I, T[i + 1] = T[i] * A_i(q_i) */
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) T[0][r][c] = r == c ? 1.0f : 0.0f;
    for (int i = 0; i < 6; i++) {
        const float c = cosf(q[i]), s = sinf(q[i]), ca = COS_ALPHA[i], sa = SIN_ALPHA[i];
        const float A[4][4] = {{c, -s * ca, s * sa, DH_A[i] * c},
                               {s, c * ca, -c * sa, DH_A[i] * s},
                               {0.0f, sa, ca, DH_D[i]},
                               {0.0f, 0.0f, 0.0f, 1.0f}};
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < 4; k++) {
                float t = 0.0f;
                for (int j = 0; j < 4; j++) t += T[i][r][j] * A[j][k];
                T[i + 1][r][k] = t;
            }
    }
    float J[6][6], pe[3] = {T[6][0][3], T[6][1][3], T[6][2][3]};
    for (int i = 0; i < 6; i++) {
        const float z[3] = {T[i][0][2], T[i][1][2], T[i][2][2]};
        const float d[3] = {pe[0] - T[i][0][3], pe[1] - T[i][1][3], pe[2] - T[i][2][3]};
        float v[3];
        cross(z, d, v);
        for (int r = 0; r < 3; r++) { J[r][i] = v[r]; J[r + 3][i] = z[r]; }
    }
    float e[6] = {p_target[0] - pe[0], p_target[1] - pe[1], p_target[2] - pe[2], 0, 0, 0};
    for (int k = 0; k < 3; k++) {
        const float rk[3] = {T[6][0][k], T[6][1][k], T[6][2][k]};
        const float tk[3] = {r_target[k], r_target[3 + k], r_target[6 + k]};
        float v[3];
        cross(rk, tk, v);
        for (int r = 0; r < 3; r++) e[3 + r] += 0.5f * v[r];
    }
    float A[8][8], b[8][8];
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j <= (lu ? 5 : i); j++) {
            float t = 0.0f;
            for (int k = 0; k < 6; k++) t += J[i][k] * J[j][k];
            A[i][j] = t + (i == j ? DAMPING * DAMPING : 0.0f);
        }
        b[i][0] = e[i];
    }
    if (lu) {
        solve(6, 1, A, b);
        for (int i = 0; i < 6; i++) e[i] = b[i][0];
    } else {
        solve_pos(6, A, e);
    }
    for (int i = 0; i < 6; i++) {
        float t = 0.0f;
        for (int k = 0; k < 6; k++) t += J[k][i] * e[k];
        q_out[i] = q[i] + t;
    }
}

#define IK(NAME, LU)                                                                        \
    void NAME##_step(const float *q, const float *p_target, const float *r_target,          \
                     float *q_out)                                                           \
    {                                                                                        \
        ik(q, p_target, r_target, q_out, LU);                                                \
    }                                                                                        \
    double time_##NAME(long reps, const float *q, const float *p_target,                    \
                       const float *r_target, float *q_out)                                  \
    {                                                                                        \
        double t0 = now();                                                                   \
        for (long i = 0; i < reps; i++) {                                                    \
            __asm__ volatile("" : : "r"(q), "r"(p_target), "r"(r_target) : "memory");       \
            NAME##_step(q, p_target, r_target, q_out);                                       \
        }                                                                                    \
        return (now() - t0) / (double)reps;                                                  \
    }

IK(ik, 0)
IK(iklu, 1)

/* ---- LQR step: u = -K x, x' = A x + B u (A n x n, B n x m, K m x n, row-major), the
 * sizes compile-time constants as a controller's are ---- */
#define LQR(N, M)                                                                            \
    void lqr_##N##_step(const float *x, const float *A, const float *B, const float *K,       \
                      float *x_out)                                                          \
    {                                                                                        \
        float u[M];                                                                          \
        for (int i = 0; i < M; i++) {                                                        \
            float t = 0.0f;                                                                  \
            for (int j = 0; j < N; j++) t += K[i * N + j] * x[j];                            \
            u[i] = -t;                                                                       \
        }                                                                                    \
        for (int i = 0; i < N; i++) {                                                        \
            float t = 0.0f;                                                                  \
            for (int j = 0; j < N; j++) t += A[i * N + j] * x[j];                            \
            float v = 0.0f;                                                                  \
            for (int j = 0; j < M; j++) v += B[i * M + j] * u[j];                            \
            x_out[i] = t + v;                                                                \
        }                                                                                    \
    }                                                                                        \
    double time_lqr_##N(long reps, const float *x, const float *A, const float *B,          \
                        const float *K, float *x_out)                                        \
    {                                                                                        \
        double t0 = now();                                                                   \
        for (long i = 0; i < reps; i++) {                                                    \
            __asm__ volatile("" : : "r"(x), "r"(A), "r"(B), "r"(K) : "memory");             \
            lqr_##N##_step(x, A, B, K, x_out);                                                 \
        }                                                                                    \
        return (now() - t0) / (double)reps;                                                  \
    }

LQR(4, 2)
LQR(12, 6)
LQR(24, 12)
