/* tls_module — a module with its own __thread data (general-dynamic model),
 * loaded with dlopen() by tests/tls.c: its TLS is dynamic TLS. */
static __thread long value = 7;
static __thread char big[10000];

long tls_module_get(void);
void tls_module_set(long v);
char *tls_module_big(void);

long tls_module_get(void) { return value; }
void tls_module_set(long v) { value = v; }
char *tls_module_big(void) { return big; }
